"""Record mode: answer replay misses from a live HTTP endpoint the user configured, and store the answers.

The only part of rig.maps that may use the network, and only after `Recorder(..., enable=True)`, which lifts
rig's offline guard loudly. API keys come from an environment variable named in the endpoint config and are
never part of the replay key, the stored response or the config file.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rig.maps.replay import ReplayAnswer, ReplayStore

# (method, url, params) -> decoded JSON; swapped out in tests for a local server or a fake.
Transport = Callable[[str, str, dict[str, str], float], Any]


class RecordEndpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str  # e.g. https://maps.example.com/v3/place/text
    method: Literal["GET", "POST"] = "GET"
    static_params: dict[str, str] = Field(default_factory=dict)  # sent, not keyed (e.g. output=json)
    key_param: str | None = None  # query parameter that carries the API key
    key_env: str | None = None  # environment variable holding the key
    timeout_s: float = Field(default=10.0, gt=0, le=120)


def _flatten(args: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for k, v in args.items():
        if v is None:
            continue
        out[k] = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return out


def http_transport(method: str, url: str, params: dict[str, str], timeout: float) -> Any:
    data = None
    if method == "GET":
        url = f"{url}{'&' if '?' in url else '?'}{urllib.parse.urlencode(params)}"
    else:
        data = urllib.parse.urlencode(params).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


class Recorder:
    """Replay first; on a miss, ask the live endpoint and store its answer (label "hit" on later runs)."""

    def __init__(
        self,
        store: ReplayStore,
        provider: str,
        endpoints: Mapping[str, RecordEndpoint],
        *,
        enable: bool = False,
        transport: Transport | None = None,
    ) -> None:
        if not enable:
            raise PermissionError("record mode reaches a live map provider; pass enable=True (CLI: --record)")
        self.store, self.provider, self.endpoints = store, provider, dict(endpoints)
        self.transport = transport or http_transport
        self.recorded = 0
        if transport is None:
            from rig import offline

            offline.allow_network(f"map record mode ({provider})")

    def call(self, endpoint: str, args: Mapping[str, Any]) -> ReplayAnswer:
        cached = self.store.get(self.provider, endpoint, args)
        if cached.label != "miss":
            return cached
        cfg = self.endpoints.get(endpoint)
        if cfg is None:
            return cached
        params = {**cfg.static_params, **_flatten(args)}
        if cfg.key_param and cfg.key_env:
            key = os.environ.get(cfg.key_env)
            if not key:
                raise PermissionError(f"record mode: environment variable {cfg.key_env} (API key) is not set")
            params[cfg.key_param] = key
        response = self.transport(cfg.method, cfg.url, params, cfg.timeout_s)
        key = self.store.put(self.provider, endpoint, args, response)
        self.recorded += 1
        return ReplayAnswer(
            label="hit", response=response, provider=self.provider, endpoint=endpoint, key=key, matched_key=key
        )


class RecordConfig(BaseModel):
    """A record-mode config file (YAML): one provider, its endpoints, and how each endpoint is keyed."""

    model_config = ConfigDict(extra="forbid")
    provider: str
    endpoints: dict[str, RecordEndpoint]
    keys: dict[str, dict[str, Any]] = Field(default_factory=dict)  # endpoint -> KeySpec fields


class RecordQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str
    args: dict[str, Any]


def load_record_inputs(config_path: str, queries_path: str) -> tuple[RecordConfig, list[RecordQuery]]:
    """Read and check both files; errors name the file and the line or field."""
    import yaml
    from pydantic import ValidationError

    try:
        with open(config_path, encoding="utf-8") as f:
            cfg = RecordConfig.model_validate(yaml.safe_load(f))
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{config_path}: {e}") from None
    except ValidationError as e:
        err = e.errors()[0]
        raise ValueError(f"{config_path}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    queries = []
    with open(queries_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                q = RecordQuery.model_validate_json(line)
            except ValidationError as e:
                raise ValueError(f"{queries_path}: line {n}: {e.errors()[0]['msg']}") from None
            if q.endpoint not in cfg.endpoints:
                raise ValueError(f"{queries_path}: line {n}: endpoint {q.endpoint!r} is not in {config_path}")
            queries.append(q)
    return cfg, queries
