"""``[plugin.qemu]`` args_allowlist, without QEMU: which of a task's ``args`` are refused."""

from __future__ import annotations

import pytest
from herder_qemu.config import PluginConfig


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
])
def test_each_option_must_be_in_the_allowlist(args: tuple[str, ...], refused: list[str]) -> None:
    assert PluginConfig.from_mapping({"args_allowlist": ["-smp", "--nodefaults"]}).refused_args(args) == refused


@pytest.mark.parametrize("allowlist", ["-smp", ["smp"], [1]])
def test_a_bad_allowlist_is_refused(allowlist: object) -> None:
    with pytest.raises(ValueError, match=r"\[plugin.qemu\] args_allowlist must be a list of QEMU options"):
        PluginConfig.from_mapping({"args_allowlist": allowlist})
