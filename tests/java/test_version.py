"""``java -version`` as JVMs of many vendors and versions print it, and as the JVM of this machine does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from herder_java.version import JavaVersion, parse_version

from tests.support.require import require

OPENJDK_8 = """\
openjdk version "1.8.0_412"
OpenJDK Runtime Environment (build 1.8.0_412-8u412-ga-1~22.04.1-b08)
OpenJDK 64-Bit Server VM (build 25.412-b08, mixed mode)
"""
OPENJDK_11 = """\
openjdk version "11.0.23" 2024-04-16
OpenJDK Runtime Environment (build 11.0.23+9-post-Ubuntu-1ubuntu122.04.1)
OpenJDK 64-Bit Server VM (build 11.0.23+9-post-Ubuntu-1ubuntu122.04.1, mixed mode, sharing)
"""
TEMURIN_17 = """\
openjdk version "17.0.11" 2024-04-16
OpenJDK Runtime Environment Temurin-17.0.11+9 (build 17.0.11+9)
OpenJDK 64-Bit Server VM Temurin-17.0.11+9 (build 17.0.11+9, mixed mode, sharing)
"""
OPENJDK_21 = """\
openjdk version "21.0.3" 2024-04-16 LTS
OpenJDK Runtime Environment (build 21.0.3+9-LTS)
OpenJDK 64-Bit Server VM (build 21.0.3+9-LTS, mixed mode, sharing)
"""
ORACLE_8 = """\
java version "1.8.0_131"
Java(TM) SE Runtime Environment (build 1.8.0_131-b11)
Java HotSpot(TM) 64-Bit Server VM (build 25.131-b11, mixed mode)
"""
OPENJ9_11 = """\
openjdk version "11.0.12" 2021-07-20
OpenJDK Runtime Environment AdoptOpenJDK-11.0.12+7 (build 11.0.12+7)
Eclipse OpenJ9 VM AdoptOpenJDK-11.0.12+7 (build openj9-0.27.0, JRE 11 Linux amd64-64-Bit Compressed References 20210720_90 (JIT enabled, AOT enabled)
OpenJ9   - 1851b0074
OMR      - 9db1c870d
JCL      - 21849e2ca0 based on jdk-11.0.12+7)
"""  # noqa: E501 - as the JVM prints it
IBM_8 = """\
java version "1.8.0_211"
Java(TM) SE Runtime Environment (build 8.0.5.37 - pxa6480sr5fp37-20190618_01(SR5 FP37))
IBM J9 VM (build 2.9, JRE 1.8.0 Linux amd64-64-Bit Compressed References 20190617_419755 (JIT enabled, AOT enabled)
OpenJ9   - 354b31d
OMR      - 0437c69
IBM      - 4972efe)
JCL - 20190606_01 based on Oracle jdk8u211-b25
"""
GRAALVM_CE_17 = """\
openjdk version "17.0.9" 2023-10-17
OpenJDK Runtime Environment GraalVM CE 17.0.9+9.1 (build 17.0.9+9-jvmci-23.0-b22)
OpenJDK 64-Bit Server VM GraalVM CE 17.0.9+9.1 (build 17.0.9+9-jvmci-23.0-b22, mixed mode, sharing)
"""
ORACLE_GRAALVM_21 = """\
java version "21.0.2" 2024-01-16 LTS
Java(TM) SE Runtime Environment Oracle GraalVM 21.0.2+13.1 (build 21.0.2+13-LTS-jvmci-23.1-b30)
Java HotSpot(TM) 64-Bit Server VM Oracle GraalVM 21.0.2+13.1 (build 21.0.2+13-LTS-jvmci-23.1-b30, mixed mode, sharing)
"""


@pytest.mark.parametrize(("output", "version", "runtime", "vm"), [
    (OPENJDK_8, "1.8.0_412", "OpenJDK Runtime Environment (build 1.8.0_412-8u412-ga-1~22.04.1-b08)",
     "OpenJDK 64-Bit Server VM (build 25.412-b08, mixed mode)"),
    (OPENJDK_11, "11.0.23", "OpenJDK Runtime Environment (build 11.0.23+9-post-Ubuntu-1ubuntu122.04.1)",
     "OpenJDK 64-Bit Server VM (build 11.0.23+9-post-Ubuntu-1ubuntu122.04.1, mixed mode, sharing)"),
    (TEMURIN_17, "17.0.11", "OpenJDK Runtime Environment Temurin-17.0.11+9 (build 17.0.11+9)",
     "OpenJDK 64-Bit Server VM Temurin-17.0.11+9 (build 17.0.11+9, mixed mode, sharing)"),
    (OPENJDK_21, "21.0.3", "OpenJDK Runtime Environment (build 21.0.3+9-LTS)",
     "OpenJDK 64-Bit Server VM (build 21.0.3+9-LTS, mixed mode, sharing)"),
    (ORACLE_8, "1.8.0_131", "Java(TM) SE Runtime Environment (build 1.8.0_131-b11)",
     "Java HotSpot(TM) 64-Bit Server VM (build 25.131-b11, mixed mode)"),
    (OPENJ9_11, "11.0.12", "OpenJDK Runtime Environment AdoptOpenJDK-11.0.12+7 (build 11.0.12+7)",
     "Eclipse OpenJ9 VM AdoptOpenJDK-11.0.12+7 (build openj9-0.27.0, JRE 11 Linux amd64-64-Bit Compressed "
     "References 20210720_90 (JIT enabled, AOT enabled)"),
    (IBM_8, "1.8.0_211", "Java(TM) SE Runtime Environment (build 8.0.5.37 - pxa6480sr5fp37-20190618_01(SR5 FP37))",
     "IBM J9 VM (build 2.9, JRE 1.8.0 Linux amd64-64-Bit Compressed References 20190617_419755 (JIT enabled, "
     "AOT enabled)"),
    (GRAALVM_CE_17, "17.0.9", "OpenJDK Runtime Environment GraalVM CE 17.0.9+9.1 (build 17.0.9+9-jvmci-23.0-b22)",
     "OpenJDK 64-Bit Server VM GraalVM CE 17.0.9+9.1 (build 17.0.9+9-jvmci-23.0-b22, mixed mode, sharing)"),
    (ORACLE_GRAALVM_21, "21.0.2",
     "Java(TM) SE Runtime Environment Oracle GraalVM 21.0.2+13.1 (build 21.0.2+13-LTS-jvmci-23.1-b30)",
     "Java HotSpot(TM) 64-Bit Server VM Oracle GraalVM 21.0.2+13.1 (build 21.0.2+13-LTS-jvmci-23.1-b30, mixed mode, "
     "sharing)"),
], ids=["openjdk-8", "openjdk-11", "temurin-17", "openjdk-21", "oracle-8", "openj9-11", "ibm-j9-8", "graalvm-ce-17",
        "oracle-graalvm-21"])
def test_parses_each_vendors_format(output: str, version: str, runtime: str, vm: str) -> None:
    assert parse_version(output) == JavaVersion(version, runtime, vm)


@pytest.mark.parametrize("picked_up", [
    "Picked up _JAVA_OPTIONS: -Xmx512m -Djava.awt.headless=true",
    "Picked up JAVA_TOOL_OPTIONS: -javaagent:/opt/agent.jar -Dfile.encoding=UTF-8",
    "NOTE: Picked up JDK_JAVA_OPTIONS: --add-opens=java.base/java.lang=ALL-UNNAMED",
])
def test_a_line_of_options_picked_up_from_the_environment_is_skipped(picked_up: str) -> None:
    assert parse_version(f"{picked_up}\n{ORACLE_8}") == parse_version(ORACLE_8)
    both = f"Picked up JAVA_TOOL_OPTIONS: -Dx=1\nPicked up _JAVA_OPTIONS: -Dversion=\"2\"\n{OPENJDK_21}"
    assert parse_version(both).version == "21.0.3"


def test_a_vm_warning_before_or_between_the_lines_is_passed_over() -> None:
    warning = "OpenJDK 64-Bit Server VM warning: Options -Xverify:none and -noverify were deprecated in JDK 13"
    lines = OPENJDK_11.splitlines()
    assert parse_version("\n".join([warning, *lines])) == parse_version(OPENJDK_11)
    assert parse_version("\n".join([lines[0], warning, *lines[1:]])) == parse_version(OPENJDK_11)


def test_windows_line_ends_and_stray_blank_lines() -> None:
    assert parse_version("\r\n" + ORACLE_8.replace("\n", "\r\n\r\n")) == parse_version(ORACLE_8)


@pytest.mark.parametrize("output", ["", "Error: could not find libjava.so\nError: Could not find Java SE Runtime "
                                        "Environment.\n", "Picked up _JAVA_OPTIONS: -Xmx1g\n"])
def test_no_version_line_is_an_error_saying_what_was_printed(output: str) -> None:
    with pytest.raises(ValueError, match="no version in the output of java -version"):
        parse_version(output)


def _java() -> str:
    java = shutil.which("java")
    require("java", java is not None, "no java on PATH")
    assert java is not None
    return java


def _properties(java: str) -> dict[str, str]:
    """What the JVM says of itself (``-XshowSettings:properties``), to check the parse against."""
    done = subprocess.run([java, "-XshowSettings:properties", "-version"], capture_output=True, text=True, timeout=60)
    return dict(re.findall(r"^\s+(java\.[\w.]+) = (.*)$", done.stderr, re.MULTILINE))


def test_the_jvm_of_this_machine() -> None:
    java = _java()
    environ = {key: value for key, value in os.environ.items() if "JAVA_OPTIONS" not in key}
    done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, env=environ)
    parsed = parse_version(done.stderr)
    properties = _properties(java)
    assert parsed.version == properties["java.version"]
    assert properties["java.runtime.version"] in parsed.runtime
    assert properties["java.runtime.name"] in parsed.runtime
    assert parsed.vm.startswith(properties["java.vm.name"])


def test_the_jvm_of_this_machine_with_options_in_the_environment() -> None:
    java = _java()
    environ = {**os.environ, "_JAVA_OPTIONS": "-Xmx64m", "JAVA_TOOL_OPTIONS": "-Dherder.test=1"}
    done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, env=environ)
    assert done.stderr.startswith("Picked up "), done.stderr
    assert parse_version(done.stderr).version == _properties(java)["java.version"]
