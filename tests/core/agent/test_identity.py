"""Workload identities: a task's token, signed by the agent's key, verifies against the key set the
agent serves without a credential at ``/.well-known/jwks.json``, with Nomad 1.7's claims."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import httpx
import jwt
import pytest

from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for, wait_for_text

JOB = """
job "{name}" {{
  type = "batch"
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      identity {{
        env  = true
        file = true
      }}
      identity {{
        name = "db"
        aud  = ["postgres"]
        ttl  = "1h"
        file = true
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "printf %s \\"$NOMAD_TOKEN\\" > {out}/env.tmp && mv {out}/env.tmp {out}/env; exec sleep 3600"]
      }}
    }}
  }}
}}
"""


@pytest.mark.slow
def test_a_tasks_token_verifies_against_the_served_key_set(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    agent = AgentProcess(tmp_path / "agent", token="s3cret-token").start()
    out = tmp_path / "out"
    out.mkdir()
    try:
        placed = agent.submit(JOB.format(name="who", out=out))
        alloc_id = placed["allocations"][0]["id"]
        from_env = wait_for_text(out / "env")
        secrets = agent.data_dir / "allocs" / alloc_id / "t" / "secrets"
        from_file = (secrets / "nomad_token").read_text()
        assert from_file == from_env
        assert stat.S_IMODE((secrets / "nomad_token").stat().st_mode) == 0o600

        # No credential: a service the task shows its token to has none of the agent's.
        answer = httpx.get(f"{agent.url}/.well-known/jwks.json")
        assert answer.status_code == 200, answer.text
        assert httpx.post(f"{agent.url}/.well-known/jwks.json", json={}).status_code == 401
        keys = jwt.PyJWKSet.from_dict(answer.json())
        header = jwt.get_unverified_header(from_env)
        key = next(k for k in keys.keys if k.key_id == header["kid"])
        claims = jwt.decode(from_env, key.key, algorithms=["RS256"], audience="nomadproject.io")
        assert claims["nomad_namespace"] == "default"
        assert claims["nomad_job_id"] == "who"
        assert claims["nomad_allocation_id"] == alloc_id
        assert claims["nomad_task"] == "t"
        assert claims["sub"] == "global:default:who:g:t:default"
        assert claims["iat"] == claims["nbf"] and abs(claims["iat"] - time.time()) < 300
        assert "exp" not in claims

        named = (secrets / "nomad_db.jwt").read_text()
        db = jwt.decode(named, key.key, algorithms=["RS256"], audience="postgres")
        assert db["sub"] == "global:default:who:g:t:db" and db["exp"] == db["iat"] + 3600
        with pytest.raises(jwt.InvalidAudienceError):
            jwt.decode(named, key.key, algorithms=["RS256"], audience="nomadproject.io")
        tampered = from_env[:-4] + ("AAAA" if not from_env.endswith("AAAA") else "BBBB")
        with pytest.raises(jwt.InvalidSignatureError):
            jwt.decode(tampered, key.key, algorithms=["RS256"], audience="nomadproject.io")

        # The key is the data dir's, kept across starts: a token handed out before still verifies.
        key_file = agent.data_dir / "identity.key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        agent.kill()
        agent.start()
        again = wait_for(lambda: httpx.get(f"{agent.url}/.well-known/jwks.json").json(), 30.0, "the key set")
        assert json.dumps(again, sort_keys=True) == json.dumps(answer.json(), sort_keys=True)
    finally:
        agent.shutdown()
