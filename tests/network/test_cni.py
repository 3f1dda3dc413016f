"""The CNI runner against the real plugins: a plugin's own error is told, and a failed ADD leaves nothing."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from herder.client.network.cni import Attachment, Cni, CniError, ConfList
from tests.support.network import cni_dir, leftovers


def test_a_failing_plugin_is_named_with_its_message_and_the_list_is_undone(netns: Path, tmp_path: Path) -> None:
    directory = cni_dir()
    assert directory is not None
    container = str(uuid.uuid4())
    conflist = ConfList.from_json(json.dumps({"cniVersion": "0.4.0", "name": "broken", "plugins": [
        {"type": "loopback"},
        {"type": "bridge", "bridge": f"hdt{container[:8]}",
         "ipam": {"type": "host-local", "ranges": [[{"subnet": "not-a-subnet"}]], "dataDir": str(tmp_path)}},
    ]}))
    try:
        with pytest.raises(CniError, match=r"CNI plugin bridge \(ADD\) failed: .*not-a-subnet"):
            Cni([directory]).add(conflist, Attachment(container, netns))
    finally:  # the bridge plugin makes its bridge before it asks for an address
        subprocess.run(["ip", "link", "delete", f"hdt{container[:8]}"], capture_output=True, timeout=30, check=False)
    assert leftovers(container, lease_dirs=[tmp_path]) == []


def test_a_missing_plugin_is_named(netns: Path) -> None:
    conflist = ConfList.from_json('{"cniVersion": "0.4.0", "name": "x", "plugins": [{"type": "nosuch"}]}')
    with pytest.raises(CniError, match="CNI plugin nosuch \\(ADD\\) is not in /nowhere"):
        Cni([Path("/nowhere")]).add(conflist, Attachment(str(uuid.uuid4()), netns))


@pytest.mark.parametrize(("text", "message"), [
    ("[", "is not JSON"),
    ('{"cniVersion": "0.4.0", "plugins": [{"type": "loopback"}]}', "has no name"),
    ('{"name": "x", "plugins": [{"type": "../../bin/sh"}]}', "is not a plugin's name"),
    ('{"name": "x", "plugins": []}', "plugins must be a list of objects, each with a type"),
])
def test_a_bad_configuration_is_refused(text: str, message: str) -> None:
    with pytest.raises(CniError, match=message):
        ConfList.from_json(text, "conf")
