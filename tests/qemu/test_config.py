"""``[plugin.qemu]`` args_allowlist and a task's paths, without QEMU: which ``args`` and paths are refused."""

from __future__ import annotations

import pytest
from herder_qemu.config import TASK_SCHEMA, PluginConfig, TaskConfig

from herder.jobspec.task_config import validate_config


def test_without_an_allowlist_every_argument_is_refused() -> None:
    config = PluginConfig.from_mapping({})
    assert config.args_allowlist == ()
    assert config.refused_args(("-drive", "file=/dev/sda")) == ["-drive", "file=/dev/sda"]
    assert config.refused_args(()) == []


@pytest.mark.parametrize(("args", "refused"), [
    (("-smp", "2", "-nodefaults"), []),
    (("--smp", "2"), []),  # QEMU's other spelling of the same option
    (("-smp", "2", "-drive", "file=/dev/sda"), ["-drive"]),
    (("--drive", "file=/dev/sda", " -usb"), ["--drive", " -usb"]),
    (("-smp=2,-drive",), []),  # one option's value, whatever it holds
    (("-smp", "2", "local/x.qcow2"), ["local/x.qcow2"]),  # a word alone: a disk image QEMU opens itself
    (("local/x.qcow2", "-smp", "2"), ["local/x.qcow2"]),
])
def test_each_option_must_be_in_the_allowlist(args: tuple[str, ...], refused: list[str]) -> None:
    assert PluginConfig.from_mapping({"args_allowlist": ["-smp", "--nodefaults"]}).refused_args(args) == refused


@pytest.mark.parametrize("allowlist", ["-smp", ["smp"], [1]])
def test_a_bad_allowlist_is_refused(allowlist: object) -> None:
    with pytest.raises(ValueError, match=r"\[plugin.qemu\] args_allowlist must be a list of QEMU options"):
        PluginConfig.from_mapping({"args_allowlist": allowlist})


@pytest.mark.parametrize(("config", "key", "refused"), [
    ({"image_path": "local/a,b.img"}, "image_path", "a comma"),
    ({"kernel": "local/vmlinuz,/etc/shadow"}, "kernel", "a comma"),
    ({"kernel": "local/k", "initrd": "local/x,/etc/shadow"}, "initrd", "a comma"),
    ({"kernel": "local/k", "initrd": "local/x /etc/shadow"}, "initrd", "a space"),  # a multiboot module's arguments
])
def test_paths_holding_qemus_separators_are_refused(config: dict[str, str], key: str, refused: str) -> None:
    [problem] = validate_config("task t", config, TASK_SCHEMA)
    assert problem.startswith(f"task t.config.{key}: must not hold ") and refused in problem, problem
    with pytest.raises(ValueError, match=rf"config\.{key}: '{config[key]}' must not hold .*{refused}"):
        TaskConfig.from_mapping(config)


def test_a_space_is_fine_in_a_disk_images_path() -> None:
    assert validate_config("task t", {"image_path": "local/my disk.img"}, TASK_SCHEMA) == []
    assert TaskConfig.from_mapping({"image_path": "local/my disk.img"}).image_path == "local/my disk.img"
