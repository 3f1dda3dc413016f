"""The templates plugin: rendering, waiting for what is missing, env files, confinement.

Keys and services come from small in-memory stores here (the plugin's
interfaces, :mod:`herder.client.hooks.template_sources`); the Consul
implementations are tested against a real Consul agent in
``test_templates_consul.py``.
"""

from __future__ import annotations

import os
import pwd
import threading
from pathlib import Path

import pytest

from herder.client.hooks import templates
from herder.client.hooks.template_functions import timestamp
from herder.client.hooks.template_sources import CatalogService, ServiceEntry
from herder.client.hooks.templates import TemplateRenderError, TemplatesConfig, TemplatesPlugin, parse_env_file
from herder.errors import ConfigError, RecoverableError
from herder.model import Task, Template
from tests.core.client.artifact_support import Context
from tests.support.waiting import TIMEOUT, wait_for


class MemoryKV:
    """A key/value store in memory, standing in for Consul's."""

    description = "memory"

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.values.get(key)


class MemoryCatalog:
    """A service catalog in memory, standing in for the services registry."""

    description = "memory"

    def __init__(self) -> None:
        self.entries: list[ServiceEntry] = []

    def service(self, name: str, tag: str = "") -> list[ServiceEntry]:
        return [e for e in self.entries if e.Name == name and (not tag or tag in e.Tags)]

    def services(self) -> list[CatalogService]:
        names = sorted({e.Name for e in self.entries})
        return [CatalogService(n, tuple(sorted({t for e in self.entries if e.Name == n for t in e.Tags})))
                for n in names]


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "run")


@pytest.fixture
def kv() -> MemoryKV:
    return MemoryKV()


@pytest.fixture
def catalog() -> MemoryCatalog:
    return MemoryCatalog()


@pytest.fixture
def plugin(kv: MemoryKV, catalog: MemoryCatalog) -> TemplatesPlugin:
    plugin = TemplatesPlugin(TemplatesConfig(poll_interval=0.05), kv=kv, catalog=catalog)
    yield plugin
    plugin.close()


def prestart(plugin: TemplatesPlugin, context: Context, *templates: Template) -> None:
    plugin.herder_task_prestart(Task(name="t", driver="raw_exec", templates=templates), context.ctx)


def test_data_is_rendered_with_the_task_environment(plugin: TemplatesPlugin, context: Context) -> None:
    template = Template(destination="local/app.conf", perms="0600",
                        data='port={{ env "NOMAD_PORT_http" }}\nhome={{ env.HOME_DIR | toUpper }}\n'
                             'none=[{{ env "NOPE" }}]\n')
    prestart(plugin, context, template)
    written = context.task_dir / "local/app.conf"
    assert written.read_text() == "port=8080\nhome=/HOME/X\nnone=[]\n"
    assert written.stat().st_mode & 0o777 == 0o600


def test_a_source_in_the_task_dir_and_other_delimiters(plugin: TemplatesPlugin, context: Context) -> None:
    (context.task_dir / "local/app.tpl").write_text('name=[[ "a,b" | split "," | join "-" ]] {{ raw }}')
    prestart(plugin, context, Template(destination="local/app.conf", source="local/app.tpl",
                                       left_delimiter="[[", right_delimiter="]]"))
    assert (context.task_dir / "local/app.conf").read_text() == "name=a-b {{ raw }}"


def test_consul_template_functions(plugin: TemplatesPlugin, context: Context, kv: MemoryKV,
                                   catalog: MemoryCatalog) -> None:
    kv.values["app/name"] = "shop"
    catalog.entries = [ServiceEntry("db", "db-1", "10.0.0.1", 5432, ("primary",)),
                       ServiceEntry("db", "db-2", "10.0.0.2", 5433, ("replica",))]
    (context.task_dir / "local/motd").write_text("hello")
    data = (
        '{{ key "app/name" }} {{ keyOrDefault "app/missing" "dflt" }} {{ keyExists "app/name" }}\n'
        '{{ range service "db" }}{{ .Address }}:{{ .Port }} {{ end }}\n'
        '{{ range service "replica.db" }}{{ .ID }}{{ end }}\n'
        '{{ range services }}{{ .Name }}={{ join "," .Tags }}{{ end }}\n'
        '{{ file "local/motd" }} {{ "a-b" | replaceAll "-" "+" }} {{ printf "%03d" 7 }} {{ toLower "X" }}\n'
        '{{ toJSON (service "db" | len) }} {{ "  x " | trimSpace }} {{ parseInt "42" | printf "%d" }}\n'
    )
    prestart(plugin, context, Template(destination="local/out", data=data))
    assert (context.task_dir / "local/out").read_text().splitlines() == [
        "shop dflt true", "10.0.0.1:5432 10.0.0.2:5433 ", "db-2", "db=primary,replica", "hello a+b 007 x", "2 x 42"]


def test_regular_expressions_are_go_s(plugin: TemplatesPlugin, context: Context) -> None:
    data = ('{{ regexMatch "^a+$" "aaa" }} {{ regexMatch "^a+$" "aaa\\n" }} '
            '{{ "web-42" | regexReplaceAll "([a-z]+)-(?P<n>\\\\d+)" "${n}:$1$$" }} '
            '{{ regexReplaceAll "(a+)+$" "" "' + "a" * 40 + '!" }}')  # no backtracking: linear time
    prestart(plugin, context, Template(destination="local/out", data=data))
    assert (context.task_dir / "local/out").read_text() == "true false 42:web$ " + "a" * 40 + "!"


def test_env_true_adds_the_rendered_variables(plugin: TemplatesPlugin, context: Context) -> None:
    data = '# settings\nexport GREETING="hi\\tthere"\nPORT={{ env "NOMAD_PORT_http" }}\n\nEMPTY=\n'
    prestart(plugin, context, Template(destination="secrets/app.env", data=data, env=True))
    assert context.ctx.env["GREETING"] == "hi\tthere"
    assert context.ctx.env["PORT"] == "8080" and context.ctx.env["EMPTY"] == ""
    with pytest.raises(TemplateRenderError, match="line 1 is not KEY=value"):
        parse_env_file("not a variable", "x")


def test_a_missing_key_is_waited_for_with_an_event(plugin: TemplatesPlugin, context: Context,
                                                    kv: MemoryKV) -> None:
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            prestart(plugin, context, Template(destination="local/out", data='{{ key "app/port" }}'))
        except BaseException as exc:
            errors.append(exc)
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    wait_for(lambda: context.events, what="the template's first event")
    assert [(e.type, e.message) for e in context.events] == [("Template", "Missing: kv.block(app/port)")]
    assert not (context.task_dir / "local/out").exists() and not done.is_set()
    kv.values["app/port"] = "9000"
    assert done.wait(TIMEOUT)
    thread.join()
    assert not errors
    assert (context.task_dir / "local/out").read_text() == "9000"
    assert len(context.events) == 1  # the same missing key is announced once


def test_a_service_without_instances_is_waited_for(plugin: TemplatesPlugin, context: Context,
                                                   catalog: MemoryCatalog) -> None:
    thread = threading.Thread(target=prestart, args=(plugin, context, Template(
        destination="local/out", data='{{ range service "db" }}{{ .Port }}{{ end }}')))
    thread.start()
    wait_for(lambda: context.events, what="the template's first event")
    assert context.events[0].message == "Missing: health.service(db)"
    catalog.entries = [ServiceEntry("db", "db-1", "127.0.0.1", 5432)]
    thread.join(TIMEOUT)
    assert (context.task_dir / "local/out").read_text() == "5432"


def test_a_closed_plugin_stops_waiting(plugin: TemplatesPlugin, context: Context) -> None:
    threading.Timer(0.2, plugin.close).start()
    with pytest.raises(RecoverableError, match=r"stopped while templates waited for: kv\.block"):
        prestart(plugin, context, Template(destination="local/out", data='{{ key "never" }}'))


@pytest.mark.parametrize(("template", "message"), [
    (Template(destination="local/x", data="{{ .Nope"), "template local/x: template: local/x:1: unclosed action"),
    (Template(destination="local/x", data='{{ nosuch "a" }}'), 'function "nosuch" not defined'),
    (Template(destination="local/x", data='{{ file "../../../etc/passwd" }}'), "escapes the task directory"),
    (Template(destination="../../x", data="x"), "escapes the task directory"),
    (Template(destination="local/x", data='{{ regexMatch "(a)\\\\1" "aa" }}'),
     "error calling regexMatch: invalid regular expression '(a)\\\\1': invalid escape sequence"),
    (Template(destination="local/x", data='{{ range 2000000 }}xxxxxxxxxx{{ end }}'),
     "template local/x: template output exceeds 1048576 bytes"),
    (Template(destination="local/x", data="{{ if 1 }}" * 5000 + "{{ end }}" * 5000),
     "template local/x: the template is nested too deeply"),
])
def test_errors_name_the_template(plugin: TemplatesPlugin, context: Context, template: Template,
                                  message: str) -> None:
    with pytest.raises(TemplateRenderError) as caught:
        prestart(plugin, context, template)
    assert message in str(caught.value)


def test_a_destination_through_a_link_out_is_refused(plugin: TemplatesPlugin, context: Context,
                                                     tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (context.task_dir / "local/conf").symlink_to(outside)
    with pytest.raises(TemplateRenderError, match=r"local/conf/app\.conf: local/conf: a link; not followed"):
        prestart(plugin, context, Template(destination="local/conf/app.conf", data="x"))
    assert list(outside.iterdir()) == []


def test_a_link_inside_the_task_dir_is_not_followed_either(plugin: TemplatesPlugin, context: Context) -> None:
    (context.task_dir / "local/conf").symlink_to(context.task_dir / "secrets")
    with pytest.raises(TemplateRenderError, match="local/conf: a link"):
        prestart(plugin, context, Template(destination="local/conf/app.conf", data="x"))
    assert list((context.task_dir / "secrets").iterdir()) == []


def test_a_source_or_file_through_a_link_is_not_read(plugin: TemplatesPlugin, context: Context,
                                                     tmp_path: Path) -> None:
    (tmp_path / "host.tpl").write_text("host secret")
    (context.task_dir / "local/app.tpl").symlink_to(tmp_path / "host.tpl")
    with pytest.raises(TemplateRenderError, match=r"source\(local/app.tpl\): local/app.tpl: a link"):
        prestart(plugin, context, Template(destination="local/a", source="local/app.tpl"))
    with pytest.raises(TemplateRenderError, match=r"file\(local/app.tpl\): local/app.tpl: a link"):
        prestart(plugin, context, Template(destination="local/b", data='{{ file "local/app.tpl" }}'))
    assert not (context.task_dir / "local/a").exists() and not (context.task_dir / "local/b").exists()


def test_a_source_over_the_output_bound_is_refused_unread(plugin: TemplatesPlugin, context: Context) -> None:
    with (context.task_dir / "local/app.tpl").open("wb") as source:
        source.truncate((1 << 20) + 1)
    with pytest.raises(TemplateRenderError, match=r"source\(local/app.tpl\): .* larger than the limit of 1048576"):
        prestart(plugin, context, Template(destination="local/a", source="local/app.tpl"))


def test_a_slow_render_of_few_steps_is_refused_by_its_time_limit(plugin: TemplatesPlugin, context: Context,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "MAX_SECONDS", 0.2)
    scans = '{{ $s := printf "%900000s" "" }}{{ range 5000 }}{{ regexMatch "[^x]+y" $s }}{{ end }}'
    with pytest.raises(TemplateRenderError, match="template local/x: rendering the template takes more than "
                                                  r"0.2 s of CPU time \(its limit\)"):
        prestart(plugin, context, Template(destination="local/x", data=scans))


def test_a_link_at_the_destination_is_replaced_not_written_through(plugin: TemplatesPlugin, context: Context,
                                                                   tmp_path: Path) -> None:
    (tmp_path / "host.conf").write_text("host")
    (context.task_dir / "local/app.conf").symlink_to(tmp_path / "host.conf")
    prestart(plugin, context, Template(destination="local/app.conf", data="rendered"))
    assert (tmp_path / "host.conf").read_text() == "host"
    assert not (context.task_dir / "local/app.conf").is_symlink()
    assert (context.task_dir / "local/app.conf").read_text() == "rendered"


def test_default_perms_are_not_world_readable_and_special_bits_never_applied(plugin: TemplatesPlugin,
                                                                             context: Context) -> None:
    prestart(plugin, context, Template(destination="local/default", data="x"),
             Template(destination="local/sneaky", data="x", perms="4755"))  # past validation somehow
    assert (context.task_dir / "local/default").stat().st_mode & 0o7777 == 0o640
    assert (context.task_dir / "local/sneaky").stat().st_mode & 0o7777 == 0o755


def test_timestamp_layouts() -> None:
    assert len(timestamp()) == len("2006-01-02T15:04:05Z") and timestamp().endswith("Z")
    assert timestamp("unix").isdigit()
    assert len(timestamp("2006-01-02")) == 10 and timestamp("2006-01-02")[4] == "-"


def test_the_configuration_table_is_checked() -> None:
    assert TemplatesConfig.from_table({"poll_interval": "250ms"}).poll_interval == 0.25
    with pytest.raises(ConfigError, match="unknown key"):
        TemplatesConfig.from_table({"poll": 1})


def test_a_task_found_running_is_watched_from_poststart(plugin: TemplatesPlugin, context: Context) -> None:
    class Runner:
        """Stands in for the client's task runner: a real reattach needs a whole herder restart."""

        stopping = False
        restarts: list[str] = []

        def restart(self, reason: str = "") -> None:
            self.restarts.append(reason)

        def signal(self, sig: int) -> None:
            raise AssertionError("no signal expected")

    runner = Runner()
    plugin.runners = lambda ctx: runner
    source = context.task_dir / "local/source"
    source.write_text("one")
    task = Task(name="t", driver="raw_exec", templates=(Template(
        destination="local/out", data='{{ file "local/source" }}', splay=0),))
    plugin.herder_task_poststart(task, context.ctx, handle=None)  # type: ignore[arg-type]
    source.write_text("two")
    wait_for(lambda: runner.restarts, what="the restart on a change")
    assert runner.restarts == ["Template with change_mode restart re-rendered: local/out"]
    assert (context.task_dir / "local/out").read_text() == "two"


def test_rendered_files_belong_to_the_task_user(plugin: TemplatesPlugin, context: Context) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving files to another user needs root")
    nobody = pwd.getpwnam("nobody")
    task = Task(name="t", driver="raw_exec", user="nobody",
                templates=(Template(destination="local/new/app.conf", data="x"),))
    plugin.herder_task_prestart(task, context.ctx)
    for path in ("local/new", "local/new/app.conf"):
        info = (context.task_dir / path).stat()
        assert (info.st_uid, info.st_gid) == (nobody.pw_uid, nobody.pw_gid), path
