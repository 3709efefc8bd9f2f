"""A small stand-in for the Hugging Face Hub API on 127.0.0.1, for testing `--push-to-hub`.

A real HTTP server that `huggingface_hub` talks to when `HF_ENDPOINT` points at it. It keeps
dataset repos in memory (branch -> path -> bytes) and answers the calls a push makes:

    GET  /api/whoami-v2                         401 unless the Bearer token is the expected one
    POST /api/repos/create                      409 when the repo exists
    DELETE /api/repos/delete                    404 when it does not
    GET  /api/datasets/{repo}/revision/{rev}    repo info (404 RepoNotFound / RevisionNotFound)
    GET  /api/datasets/{repo}/tree/{rev}        the files of a branch
    POST /api/datasets/{repo}/branch/{name}     a branch from main
    POST /api/validate-yaml                     the card's front matter must parse, and each
                                                config must name its data files
    POST /api/datasets/{repo}/preupload/{rev}   every file "regular" (base64 in the commit)
    POST /api/datasets/{repo}/commit/{rev}      NDJSON; applied whole, or not at all

`fail_commits` answers the first N commits with 503 (a transient fault). Every request is
recorded in `calls`, every applied commit in `commits`. It cannot know the Hub's full rules.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

import yaml

REPO = r"(?P<repo>[^/]+/[^/]+)"


@dataclass
class HubState:
    token: str
    fail_commits: int = 0
    repos: dict[str, dict[str, dict[str, bytes]]] = field(default_factory=dict)
    private: dict[str, bool] = field(default_factory=dict)
    commits: list[dict[str, Any]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    state: HubState  # set on the subclass made per server

    def log_message(self, *args: Any) -> None:  # quiet: the test reads `calls`
        pass

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def _route(self, method: str) -> None:
        path = unquote(urlparse(self.path).path)
        self.state.calls.append(f"{method} {path}")
        if self.headers.get("Authorization") != f"Bearer {self.state.token}":
            return self._send(401, {"error": "Invalid credentials in Authorization header"})
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        routes = [
            ("GET", r"/api/whoami-v2", self._whoami),
            ("POST", r"/api/repos/create", self._create),
            ("DELETE", r"/api/repos/delete", self._delete),
            ("GET", rf"/api/datasets/{REPO}/revision/(?P<rev>[^/]+)", self._info),
            ("GET", rf"/api/datasets/{REPO}/tree/(?P<rev>[^/]+)(?P<sub>/.*)?", self._tree),
            ("POST", rf"/api/datasets/{REPO}/branch/(?P<rev>[^/]+)", self._branch),
            ("POST", r"/api/validate-yaml", self._validate),
            ("POST", rf"/api/datasets/{REPO}/preupload/(?P<rev>[^/]+)", self._preupload),
            ("POST", rf"/api/datasets/{REPO}/commit/(?P<rev>[^/]+)", self._commit),
        ]
        for verb, pattern, handler in routes:
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                with self.state.lock:
                    return handler(body, **match.groupdict())
        self._send(404, {"error": f"no such route in the stand-in: {method} {path}"})

    def _send(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _missing(self, repo: str, rev: str) -> bool:
        """Answer 404 the way the Hub does when the repo or the branch is not there."""
        if repo not in self.state.repos:
            self._send(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
            return True
        if rev not in self.state.repos[repo]:
            self._send(404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"})
            return True
        return False

    def _whoami(self, body: bytes) -> None:
        self._send(
            200,
            {"type": "user", "name": "regen-tester", "auth": {"accessToken": {"role": "write"}}},
        )

    def _create(self, body: bytes) -> None:
        req = json.loads(body)
        repo = f"{req.get('organization') or 'regen-tester'}/{req['name']}"
        if repo in self.state.repos:
            return self._send(
                409, {"error": "You already created this dataset repo", "url": f"/datasets/{repo}"}
            )
        self.state.repos[repo] = {"main": {".gitattributes": b"*.parquet filter=lfs\n"}}
        # huggingface_hub 1.x sends "private", 2.x "visibility"
        self.state.private[repo] = bool(req.get("private")) or req.get("visibility") == "private"
        self._send(200, {"url": f"http://127.0.0.1/datasets/{repo}", "name": repo})

    def _delete(self, body: bytes) -> None:
        req = json.loads(body)
        repo = f"{req.get('organization') or 'regen-tester'}/{req['name']}"
        if self.state.repos.pop(repo, None) is None:
            return self._send(
                404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
            )
        self._send(200, {})

    def _info(self, body: bytes, repo: str, rev: str) -> None:
        if not self._missing(repo, rev):
            files = self.state.repos[repo][rev]
            self._send(
                200,
                {
                    "id": repo,
                    "sha": _sha(files),
                    "private": self.state.private[repo],
                    "siblings": [{"rfilename": p} for p in sorted(files)],
                },
            )

    def _tree(self, body: bytes, repo: str, rev: str, sub: str | None) -> None:
        if self._missing(repo, rev):
            return
        prefix = (sub or "").strip("/")
        files = self.state.repos[repo][rev]
        self._send(
            200,
            [
                {"type": "file", "path": p, "size": len(data), "oid": _oid(data)}
                for p, data in sorted(files.items())
                if p.startswith(prefix)
            ],
        )

    def _branch(self, body: bytes, repo: str, rev: str) -> None:
        if not self._missing(repo, "main"):
            self.state.repos[repo].setdefault(rev, dict(self.state.repos[repo]["main"]))
            self._send(200, {})

    def _validate(self, body: bytes) -> None:
        content = json.loads(body).get("content", "")
        match = re.match(r"\A---\n(.*?)\n---\n", content, re.S)
        errors = []
        try:
            meta = yaml.safe_load(match.group(1)) if match else None
        except yaml.YAMLError as exc:
            meta, errors = None, [{"message": f"YAML does not parse: {exc}"}]
        for config in (meta or {}).get("configs", []) if isinstance(meta, dict) else []:
            if not config.get("config_name") or not config.get("data_files"):
                errors.append({"message": f"config without a name or data_files: {config}"})
        self._send(400 if errors else 200, {"errors": errors, "warnings": []})

    def _preupload(self, body: bytes, repo: str, rev: str) -> None:
        if not self._missing(repo, rev):
            files = json.loads(body)["files"]
            self._send(
                200,
                {
                    "files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                        for f in files
                    ]
                },
            )

    def _commit(self, body: bytes, repo: str, rev: str) -> None:
        if self._missing(repo, rev):
            return
        if self.state.fail_commits > 0:
            self.state.fail_commits -= 1
            return self._send(503, {"error": "Service Unavailable (stand-in fault)"})
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        files = dict(self.state.repos[repo][rev])
        added, deleted = {}, []
        for item in lines[1:]:
            path = item["value"]["path"]
            if item["key"] == "file":
                added[path] = base64.b64decode(item["value"]["content"])
            elif item["key"] in ("deletedFile", "deletedFolder"):
                deleted.append(path)
                for p in [p for p in files if p == path or p.startswith(path.rstrip("/") + "/")]:
                    del files[p]
            else:
                return self._send(400, {"error": f"the stand-in takes no {item['key']}"})
        files.update(added)
        self.state.repos[repo][rev] = files
        self.state.commits.append(
            {"repo": repo, "revision": rev, "added": added, "deleted": deleted, **lines[0]["value"]}
        )
        oid = _sha(files)
        self._send(
            200,
            {
                "commitUrl": f"http://127.0.0.1/datasets/{repo}/commit/{oid}",
                "commitOid": oid,
                "pullRequestUrl": None,
            },
        )


def _oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _sha(files: dict[str, bytes]) -> str:
    digest = hashlib.sha1()
    for path, data in sorted(files.items()):
        digest.update(path.encode() + b"\0" + _oid(data).encode())
    return digest.hexdigest()


class HubStandIn:
    """Start with `with HubStandIn(token) as hub:`; `hub.url` is the HF_ENDPOINT to use."""

    def __init__(self, token: str, fail_commits: int = 0) -> None:
        self.state = HubState(token=token, fail_commits=fail_commits)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
