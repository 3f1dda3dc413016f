"""The java driver's plugin configuration and the JDK's directory, without a JVM."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from herder_java.config import PluginConfig, TaskConfig, java_home


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("raw", "message"), [
    ({"jvm": "x"}, "unknown [plugin.java] key(s): jvm"),
    ({"isolation": "runc"}, "isolation must be one of auto, exec, none, not 'runc'"),
    ({"exec": "runc"}, "exec must be a table of herder-exec's keys"),
    ({"java": 8}, "java must be a path, not 8"),
    ({"allow_unisolated": "yes"}, "allow_unisolated must be true or false, not 'yes'"),
])
def test_a_bad_plugin_table_is_refused_saying_why(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        PluginConfig.from_mapping(raw)


def test_plain_jvms_are_allowed_unless_the_configuration_says_otherwise() -> None:
    assert PluginConfig.from_mapping({}).allow_unisolated
    assert not PluginConfig.from_mapping({"allow_unisolated": False}).allow_unisolated


def test_java_comes_from_the_configuration_then_java_home_then_path(tmp_path: Path) -> None:
    configured = executable(tmp_path / "configured" / "bin" / "java")
    home = executable(tmp_path / "home" / "bin" / "java")
    on_path = executable(tmp_path / "path" / "java")
    environ = {"JAVA_HOME": str(tmp_path / "home"), "PATH": str(on_path.parent)}
    assert PluginConfig(java=str(configured)).java_binary(environ) == configured
    assert PluginConfig().java_binary(environ) == home
    assert PluginConfig().java_binary({"PATH": str(on_path.parent)}) == on_path
    assert PluginConfig().java_binary({"JAVA_HOME": str(tmp_path / "nothing"), "PATH": str(on_path.parent)}) is None
    assert PluginConfig(java=str(tmp_path / "nothing")).java_binary(environ) is None


def test_the_binary_is_resolved_through_its_symlinks(tmp_path: Path) -> None:
    real = executable(tmp_path / "jdk" / "bin" / "java")
    (tmp_path / "bin").mkdir()
    os.symlink(real, tmp_path / "bin" / "java")
    assert PluginConfig().java_binary({"PATH": str(tmp_path / "bin")}) == real


def test_the_jdk_directory_of_a_java_binary(tmp_path: Path) -> None:
    assert java_home(tmp_path / "jdk-17" / "bin" / "java") == tmp_path / "jdk-17"
    jre = executable(tmp_path / "jdk8" / "jre" / "bin" / "java")
    executable(tmp_path / "jdk8" / "bin" / "java")
    assert java_home(jre) == tmp_path / "jdk8"  # a Java 8 JDK: its jre/ uses the JDK's directory
    assert java_home(tmp_path / "jre" / "bin" / "java") == tmp_path / "jre"  # a JRE of its own, named jre


@pytest.mark.parametrize(("options", "sets"), [
    ([], False), (["-Xms64m", "-Dxmx=1"], False), (["-Xmx1g"], True), (["-XX:MaxHeapSize=268435456"], True),
])
def test_which_jvm_options_limit_the_heap(options: list[str], sets: bool) -> None:
    assert TaskConfig.from_mapping({"jar_path": "a.jar", "jvm_options": options}).sets_max_heap() is sets
