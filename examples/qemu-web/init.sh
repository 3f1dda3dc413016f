#!/bin/sh
# /init of the example's guest (and of herder's qemu tests): mounts, kernel modules, the network of
# QEMU's user-mode network (the guest is 10.0.2.15, QEMU's gateway 10.0.2.2), the power button, then
# a web server on port 80 until the guest is powered off.
#
# Given a script (the first argument after "--" on the kernel's command line), the guest runs it
# instead of the web server, and ends as a process would: powered off (QEMU exits 0) when the script
# succeeded, otherwise through QEMU's isa-debug-exit device where the task adds it (QEMU exits 2n+1
# for n written to port 0xf4: a script exiting 3 makes QEMU exit 3).
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for module in $(cat /etc/modules); do insmod "/lib/modules/$module"; done
ip link set lo up
if ip link set eth0 up 2>/dev/null; then
    ip addr add 10.0.2.15/24 dev eth0
    ip route add default via 10.0.2.2
fi

# QMP's system_powerdown presses the power button: with button.ko and evdev.ko loaded, busybox acpid
# runs /etc/acpi/PWRF/00000080, whose output goes nowhere unless it writes to the console itself.
mkdir -p /etc/acpi/PWRF /var/run /var/log
cat > /etc/acpi/PWRF/00000080 <<'HANDLER'
#!/bin/sh
echo "guest: power button pressed, powering off" > /dev/console
poweroff -f
HANDLER
chmod +x /etc/acpi/PWRF/00000080
# acpid opens the input devices there are when it starts; devtmpfs makes their nodes a moment after
# the modules made the devices.
for event in $(sed -n 's/^H: Handlers=.*\(event[0-9]*\).*/\1/p' /proc/bus/input/devices); do
    tries=50
    while [ ! -e "/dev/input/$event" ] && [ $tries -gt 0 ]; do sleep 0.1; tries=$((tries - 1)); done
done
acpid
echo "guest: up, $(grep MemTotal /proc/meminfo | tr -s ' ')"

if [ $# -eq 0 ]; then
    echo "hello from a qemu guest in ${herder_alloc:-herder}" > /www/index.html
    httpd -p 80 -h /www
    echo "guest: serving http on port 80"
    while :; do sleep 3600; done
fi

sh -c "$1"
code=$?
echo "guest: exit $code"
if [ "$code" -ne 0 ]; then
    printf "\\$(printf %o $(((code - 1) / 2)))" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
fi
poweroff -f
