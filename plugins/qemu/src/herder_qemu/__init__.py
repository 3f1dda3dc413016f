"""herder-qemu: the qemu driver for herder, virtual machines as tasks."""
