"""The artifact and template stanzas in every job format, and the errors naming their paths."""

from __future__ import annotations

import json

import pytest
import yaml

from herder.model import Artifact, Template
from tests.core.jobspec.helpers import load, problems, task_hcl

SHA = "sha256:" + "ab" * 32


def test_hcl_artifact_with_options_and_headers() -> None:
    job = load(task_hcl(f"""
      artifact {{
        source      = "https://example.com/app.tgz"
        destination = "local/app"
        mode        = "dir"
        options {{ checksum = "{SHA}" }}
        headers {{ User-Agent = "herder" }}
      }}"""))
    [artifact] = job.groups[0].tasks[0].artifacts
    assert artifact == Artifact(source="https://example.com/app.tgz", destination="local/app", mode="dir",
                                options={"checksum": SHA}, headers={"User-Agent": "herder"})
    assert not job.warnings


def test_hcl_template_with_every_key() -> None:
    job = load(task_hcl("""
      template {
        data            = "port={{ env \\"NOMAD_PORT_http\\" }}"
        destination     = "local/app.env"
        change_mode     = "signal"
        change_signal   = "SIGHUP"
        perms           = "0600"
        left_delimiter  = "[["
        right_delimiter = "]]"
        splay           = "100ms"
        env             = true
      }"""))
    [template] = job.groups[0].tasks[0].templates
    assert template == Template(destination="local/app.env", data='port={{ env "NOMAD_PORT_http" }}',
                                change_mode="signal", change_signal="SIGHUP", perms="0600", left_delimiter="[[",
                                right_delimiter="]]", splay=0.1, env=True)
    assert not job.warnings


def test_yaml_and_json_give_the_same_stanzas() -> None:
    document = {"job": {"name": "web", "groups": [{"name": "app", "tasks": [{
        "name": "server", "driver": "raw_exec",
        "artifacts": [{"source": "http://h/a.tgz", "headers": {"X": "1"}, "options": {"archive": False}}],
        "templates": [{"data": "x", "destination": "local/x", "env": True, "splay": "2s"}],
    }]}]}}
    for text, fmt in ((yaml.safe_dump(document), "yaml"), (json.dumps(document), "json")):
        task = load(text, fmt).groups[0].tasks[0]
        assert task.artifacts[0].options == {"archive": "false"} and task.artifacts[0].headers == {"X": "1"}
        assert task.templates[0].env and task.templates[0].splay == 2.0


def test_nomad_api_json_templates_and_artifacts() -> None:
    document = {"Job": {"ID": "web", "TaskGroups": [{"Name": "app", "Tasks": [{
        "Name": "server", "Driver": "raw_exec",
        "Artifacts": [{"GetterSource": "http://h/a.tgz", "RelativeDest": "local/", "GetterMode": "any",
                       "GetterOptions": {"checksum": SHA}, "GetterHeaders": {"X": "1"}}],
        "Templates": [{"EmbeddedTmpl": "x", "DestPath": "local/x", "ChangeMode": "noop", "Splay": 3_000_000_000,
                       "Envvars": True, "Perms": "0640", "LeftDelim": "{{", "RightDelim": "}}"}],
    }]}]}}
    task = load(json.dumps(document), "json").groups[0].tasks[0]
    assert task.artifacts[0].headers == {"X": "1"} and task.artifacts[0].options == {"checksum": SHA}
    assert task.templates[0] == Template(destination="local/x", data="x", change_mode="noop", splay=3.0, env=True,
                                         perms="0640")


@pytest.mark.parametrize(("body", "message"), [
    ('artifact {\n source = "http://h/a"\n destination = "../../etc"\n }',
     'job.groups[0].tasks[0].artifacts[0].destination: \'../../etc\' escapes the task directory'),
    ('artifact {\n source = "http://h/a"\n destination = "/etc"\n }',
     "artifacts[0].destination: '/etc' must be relative to the task directory"),
    ('artifact {\n source = "s3::https://s3.amazonaws.com/b/k"\n }',
     "artifacts[0].source: 's3::https://s3.amazonaws.com/b/k': herder does not fetch go-getter's s3:: sources"),
    ('artifact {\n source = "gcs::https://www.googleapis.com/storage/v1/b/k"\n }', "go-getter's gcs:: sources"),
    ('artifact {\n source = "hg::http://h/r"\n }', "go-getter's hg:: sources"),
    ('artifact {\n source = "git::ext::sh -c touch% /tmp/x"\n }',
     "artifacts[0].source: 'git::ext::sh -c touch% /tmp/x': git sources are fetched over https://, http://, "
     "ssh://, file:// only"),
    ('artifact {\n source = "git::git@github.com:o/r.git"\n }', "git sources are fetched over"),
    ('artifact {\n source = "git::https://h/r"\n options { depth = "x" }\n }',
     "artifacts[0].options.depth: 'x' must be a number of commits"),
    ('artifact {\n source = "git::https://h/r"\n options { ref = "--upload-pack=x" }\n }',
     "artifacts[0].options.ref: '--upload-pack=x' is not a branch, tag or commit"),
    ('artifact {\n source = "git::https://h/r"\n options { sshkey = "not base64!" }\n }',
     "artifacts[0].options.sshkey: must be a base64-encoded private key"),
    ('artifact {\n source = "git::https://h/r"\n options { checksum = "md5:00" }\n }',
     "artifacts[0].options.checksum: unknown option of a git:: source (herder knows ref, depth, sshkey)"),
    ('artifact {\n source = "git::https://h/r"\n mode = "file"\n }', "artifacts[0].mode: a git:: source is a "
                                                                        "directory"),
    ('artifact {\n source = "s3://b/k"\n }', "artifacts[0].source"),
    ('artifact {\n source = "http://h/a"\n options { checksum = "sha256:12" }\n }',
     "artifacts[0].options.checksum: a sha256 checksum is 64 hexadecimal digits"),
    ('artifact {\n source = "http://h/a"\n options { checksum = "crc:12" }\n }', "must be TYPE:HEX"),
    ('artifact {\n source = "http://h/a"\n options { ref = "main" }\n }', "artifacts[0].options.ref: "
                                                                           "unknown option"),
    ('artifact {\n source = "http://h/a"\n mode = "tree"\n }', "artifacts[0].mode"),
    ('template {\n data = "x"\n destination = "../../x"\n }', "templates[0].destination: '../../x' "
                                                              "escapes the task directory"),
    ('template {\n source = "/etc/passwd"\n destination = "local/x"\n }',
     "templates[0].source: '/etc/passwd' must be relative"),
    ('template {\n destination = "local/x"\n }', "templates[0]: needs data or source"),
    ('template {\n data = "x"\n destination = "local/x"\n change_mode = "signal"\n }',
     "change_signal"),
])
def test_bad_stanzas_are_named_by_path(body: str, message: str) -> None:
    errors = problems(task_hcl(body))
    assert any(message in error for error in errors), errors


def test_git_sources_and_their_options() -> None:
    job = load(task_hcl('artifact {\n source = "git::ssh://git@h/r.git"\n destination = "local/r"\n'
                        ' options {\n ref = "v1.2"\n depth = 1\n sshkey = "a2V5"\n }\n }\n'
                        'artifact {\n source = "git::https://h/r?ref=main"\n }\n'
                        'artifact {\n source = "git::file:///srv/repos/r.git"\n mode = "dir"\n }'))
    [ssh, https, local] = job.groups[0].tasks[0].artifacts
    assert ssh.options == {"ref": "v1.2", "depth": "1", "sshkey": "a2V5"}
    assert https.source == "git::https://h/r?ref=main" and local.mode == "dir"


def test_the_shared_alloc_dir_is_a_fine_destination() -> None:
    job = load(task_hcl('artifact {\n source = "http://h/a"\n destination = "../alloc/data"\n }\n'
                        'template {\n data = "x"\n destination = "${NOMAD_ALLOC_DIR}/x"\n }'))
    assert job.groups[0].tasks[0].artifacts[0].destination == "../alloc/data"
