"""Lease client for inference scripts run by Tessera (standard library only).

An `infer` job with a `cmd:` entrypoint runs your own script on every rank.
tesserad lists the job's `dataset` once into chunks of image paths; each rank
leases chunks, writes one output per item and reports a chunk done only when
all its outputs are on disk. This module does that protocol for the script
(POST /api/v1/jobs/<id>/leases, api/lease_protocol.h), so a rank or a node
killed at any moment (kill -9) costs only the chunks it held: their leases
are not renewed, go back to the queue, and the rank that redoes a chunk skips
the outputs already written. Every output is then written exactly once.

The changed lines of a plain PyTorch inference loop (copy this file beside
the script, or put python/ on PYTHONPATH):

    import tessera_lease                                                  # 1

    model = load_model().to(device).eval()
    leases = tessera_lease.Leases(suffix=".png")                          # 2
    with torch.no_grad():
        for batch in leases.batches(8):                                   # 3
            x = torch.stack([load_image(item.input_path) for item in batch])
            y = model(x.to(device)).cpu()
            for item, out in zip(batch, y):
                item.write_with(lambda tmp, out=out: save_png(out, tmp))  # 4
    leases.close()                                                        # 5

(1) the module; (2) the job's `dataset` (input folder or list file) and
`output` folder, which Tessera passes to every rank as TESSERA_INFER_DATASET
and TESSERA_INFER_OUTPUT (or pass `data=` and `output=`); (3) instead of a DataLoader over the
whole folder, the items of this rank's leased chunks whose outputs do not
exist yet, in batches of up to 8 (`for item in leases:` gives them one by
one); (4) instead of saving to the final path, a write through a temporary
file beside it (fsync, rename), `item.write_bytes(data)` for bytes in memory;
(5) reports the last chunks. The loop ends when every chunk of the job is done
(the rank then exits 0); it waits while other ranks hold the rest, since a
lease may expire and come back.

Rules the loop must follow: write every item's output before asking for the
next batch (a chunk is reported only when all of its outputs are written;
an item given and never written is an error naming it), and write the same
bytes for the same item every time (a redone chunk, or two ranks on one
chunk after a lease expired, may write an item twice; the rename keeps one).

Item outputs: `<output>/<item path>` with `suffix` appended unless the name
already ends so ("a/1.png" -> "a/1.png", "a/1.jpg" -> "a/1.jpg.png"), as the
builtin infer job names them. Absolute items (a list file) under the data
folder map as relative ones; other absolute items keep their whole path
under the output folder. Temporary files are "<dir>/.<name>.tmp-<pid>-<n>";
a chunk's stale ones (left by a killed rank) are removed before it is redone.

Environment (set by Tessera on every rank of an infer job):
    TESSERA_CONTROLLER_URL        http(s)://host[:port][/prefix], from the agent
    TESSERA_LEASE_TOKEN           the rank's bearer token for the lease route
    TESSERA_JOB_ID, TESSERA_ATTEMPT, RANK
    TESSERA_CONTROLLER_CA_FILE    a PEM file of CAs: the server's chain must
                                  verify up to one and name the host dialled
    TESSERA_CONTROLLER_CA_SHA256  the join bundle's pin: the chain must verify
                                  up to the certificate with this SHA-256
                                  fingerprint (host name not checked)
With neither of the last two, https verifies with the system's trust store.

Outside Tessera (no TESSERA_JOB_ID) the script runs unchanged on one machine:
rank RANK of WORLD_SIZE (0 of 1 by default) takes chunks RANK, RANK +
WORLD_SIZE, ... of the listed input, the way `tessera-worker infer --local`
does; outputs are written the same way.

Leases are renewed by a background thread every lease_ms / 3. Transport
errors and 429 / 5xx answers are retried with backoff for `retry_for_s`
(120 s); then, or at once for another 4xx, the call raises LeaseError.
AttemptEnded (409 / 410) means the controller ended this attempt: exit.
"""

import hashlib
import http.client
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse

__all__ = ["Leases", "Item", "LeaseError", "AttemptEnded", "output_path_for",
           "list_input_items", "write_atomically", "remove_stale_temps"]

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
_TEMP_MARKER = ".tmp-"
_temp_counter = 0
_temp_lock = threading.Lock()


class LeaseError(RuntimeError):
    """A lease call failed, or the environment or the script broke a rule.

    `field` names the environment variable, argument or item at fault.
    """

    def __init__(self, message, field=""):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class AttemptEnded(LeaseError):
    """The controller ended this attempt (409 / 410): the rank should exit."""


# ---- outputs on disk ----

def output_path_for(output_dir, data_root, item, suffix):
    """Output path of `item`, as worker/runtime/infer_items.h names it."""
    if not item:
        raise LeaseError("empty item", "item")
    p = item
    if os.path.isabs(p):
        rel = os.path.relpath(os.path.normpath(p), os.path.normpath(data_root)) \
            if data_root and os.path.isabs(data_root) else ".."
        if rel != "." and rel.split(os.sep)[0] != "..":
            p = rel
        else:
            p = p.lstrip("/")
    p = os.path.normpath(p)
    if p in (".", "") or p.split(os.sep)[0] == ".." or p.endswith(os.sep):
        raise LeaseError(f'item "{item}" leaves the output folder', "item")
    if os.path.splitext(p)[1].lower() != suffix:
        p += suffix
    return os.path.join(output_dir, p)


def _temp_path_for(final_path):
    global _temp_counter
    with _temp_lock:
        n = _temp_counter
        _temp_counter += 1
    d, name = os.path.split(final_path)
    return os.path.join(d, f".{name}{_TEMP_MARKER}{os.getpid()}-{n}")


_TEMP_NAME = re.compile(r"^\.(.+)\.tmp-[0-9]+-[0-9]+$")


def _fsync_dir(path):
    fd = os.open(path or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path, writer):
    """Writes `path` through `writer(tmp_path)`: temporary file beside it,
    fsync, rename, fsync of the folder. `path` exists only complete.

    If another writer of the same path removed our temporary file as stale,
    the write succeeds when the final file exists (it wrote the same bytes).
    """
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    tmp = _temp_path_for(path)
    try:
        writer(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    try:
        os.rename(tmp, path)
    except FileNotFoundError:
        if os.path.exists(path):
            return
        raise LeaseError(f"temporary file of {path} vanished (another writer?)", "output")
    _fsync_dir(d)


def _write_bytes_to(data):
    def writer(tmp):
        with open(tmp, "xb") as f:
            f.write(data)
    return writer


def remove_stale_temps(paths):
    """Deletes the temporary files of the final `paths` a killed writer left;
    returns how many. Call it before writing them, never while writing."""
    by_dir = {}
    for p in paths:
        d, name = os.path.split(p)
        by_dir.setdefault(d or ".", set()).add(name)
    removed = 0
    for d, names in by_dir.items():
        try:
            entries = os.listdir(d)
        except FileNotFoundError:
            continue
        for e in entries:
            m = _TEMP_NAME.match(e)
            if m and m.group(1) in names:
                try:
                    os.remove(os.path.join(d, e))
                    removed += 1
                except FileNotFoundError:
                    pass
    return removed


# ---- input listing (local runs) ----

def list_input_items(data, exclude_dir=None):
    """Items of a folder (recursive *.png|*.jpg|*.jpeg, sorted, hidden names
    skipped) or a list file (one path a line, blanks and '#' skipped), as
    tesserad lists a job's dataset."""
    if not data or not os.path.exists(data):
        raise LeaseError(f"input {data!r} does not exist", "data")
    items = []
    if os.path.isdir(data):
        exclude = os.path.realpath(exclude_dir) if exclude_dir else None
        for root, dirs, files in os.walk(data):
            dirs[:] = [x for x in dirs if not x.startswith(".") and
                       os.path.realpath(os.path.join(root, x)) != exclude]
            for f in files:
                if not f.startswith(".") and os.path.splitext(f)[1].lower() in _IMAGE_SUFFIXES:
                    items.append(os.path.relpath(os.path.join(root, f), data).replace(os.sep, "/"))
        items.sort(key=lambda s: s.encode())
    else:
        with open(data, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\r\n").rstrip(" \r").lstrip(" \t")
                if line and not line.startswith("#"):
                    items.append(line)
    if not items:
        raise LeaseError(f"no images in {data}", "data")
    return items


# ---- HTTPS ----

def _normalize_pin(text, field):
    hexpin = text.strip().lower()
    if hexpin.startswith("sha256:"):
        hexpin = hexpin[len("sha256:"):]
    hexpin = hexpin.replace(":", "")
    if not re.fullmatch(r"[0-9a-f]{64}", hexpin):
        raise LeaseError("must be a SHA-256 fingerprint (64 hex digits, colons optional)", field)
    return hexpin


def _chain_der(sock):
    """The certificates the server sent, leaf first, DER."""
    chain = None
    getter = getattr(sock, "get_unverified_chain", None)  # Python >= 3.13
    if getter is None and getattr(sock, "_sslobj", None) is not None:
        getter = getattr(sock._sslobj, "get_unverified_chain", None)  # 3.10 .. 3.12
    if getter is not None:
        chain = getter()
    if not chain:
        leaf = sock.getpeercert(binary_form=True)
        return [leaf] if leaf else []
    out = []
    for c in chain:
        out.append(c if isinstance(c, bytes) else c.public_bytes(ssl._ssl.ENCODING_DER))
    return out


def _pinned_context(host, port, pin, timeout):
    """A context that trusts the pinned certificate alone: fetched once from
    the server's chain, then every connection verifies up to it."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=timeout) as raw:
        with probe.wrap_socket(raw, server_hostname=host) as s:
            chain = _chain_der(s)
    for der in chain:
        if hashlib.sha256(der).hexdigest() == pin:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False  # the pin names this cluster's CA alone
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cadata=ssl.DER_cert_to_PEM_cert(der))
            return ctx
    raise LeaseError(f"no certificate of {host}:{port} has the pinned fingerprint",
                     "TESSERA_CONTROLLER_CA_SHA256")


# ---- the controller ----

class _HttpLeases:
    """POST <controller>/api/v1/jobs/<job>/leases, retried as the C++
    worker's HttpChunkSource retries. Thread-safe (one call at a time)."""

    def __init__(self, env, retry_for_s, request_timeout_s):
        url = env.get("TESSERA_CONTROLLER_URL", "")
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
            raise LeaseError(f"must be http(s)://host[:port][/prefix], not {url!r}",
                             "TESSERA_CONTROLLER_URL")
        self.url = url
        self.tls = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.tls else 80)
        self.job_id = env.get("TESSERA_JOB_ID", "")
        if not self.job_id:
            raise LeaseError("must be set", "TESSERA_JOB_ID")
        self.attempt = _int_env(env, "TESSERA_ATTEMPT", minimum=1)
        self.rank = _int_env(env, "RANK", minimum=0)
        self.token = env.get("TESSERA_LEASE_TOKEN", "")
        if not self.token:
            raise LeaseError("must be set (Tessera gives every rank of an infer job its own)",
                             "TESSERA_LEASE_TOKEN")
        self.target = (u.path.rstrip("/") + "/api/v1/jobs/" +
                       urllib.parse.quote(self.job_id, safe="") + "/leases")
        self.retry_for_s = retry_for_s
        self.timeout = request_timeout_s
        self.ca_file = env.get("TESSERA_CONTROLLER_CA_FILE", "")
        self.pin = env.get("TESSERA_CONTROLLER_CA_SHA256", "")
        self._ctx = None
        self._mu = threading.Lock()
        if self.tls and not self.ca_file and self.pin:
            self.pin = _normalize_pin(self.pin, "TESSERA_CONTROLLER_CA_SHA256")
        if self.tls and self.ca_file and not os.path.isfile(self.ca_file):
            raise LeaseError(f"{self.ca_file} is not a readable file", "TESSERA_CONTROLLER_CA_FILE")

    def _context(self):
        if self._ctx is None:
            if self.ca_file:
                self._ctx = ssl.create_default_context(cafile=self.ca_file)
            elif self.pin:
                self._ctx = _pinned_context(self.host, self.port, self.pin, self.timeout)
            else:
                self._ctx = ssl.create_default_context()
        return self._ctx

    def _post_once(self, body):
        if self.tls:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                               context=self._context())
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("POST", self.target, body=body,
                         headers={"Authorization": "Bearer " + self.token,
                                  "Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def lease(self, completed, max_chunks):
        body = json.dumps({"attempt": self.attempt, "rank": self.rank,
                           "max_chunks": max_chunks, "completed": completed}).encode()
        with self._mu:
            start = time.monotonic()
            backoff, tries, last = 0.2, 0, ""
            while True:
                tries += 1
                try:
                    status, data = self._post_once(body)
                except ssl.SSLCertVerificationError as e:
                    raise LeaseError(f"controller {self.url} failed TLS verification: {e}",
                                     "TESSERA_CONTROLLER_CA_SHA256" if self.pin and not
                                     self.ca_file else "TESSERA_CONTROLLER_CA_FILE")
                except LeaseError:
                    raise
                except (OSError, http.client.HTTPException) as e:
                    status, data, last = None, b"", f"{type(e).__name__}: {e}"
                if status == 200:
                    try:
                        return _parse_answer(json.loads(data))
                    except (ValueError, KeyError, TypeError) as e:
                        raise LeaseError(f"lease answer is not the protocol's JSON: {e}")
                if status is not None:
                    msg = (f"lease request to {self.url}{self.target} answered {status}: "
                           f"{_error_message(data)}")
                    if status in (409, 410):
                        raise AttemptEnded(msg)
                    if status != 429 and status < 500:
                        raise LeaseError(msg, "TESSERA_LEASE_TOKEN" if status in (401, 403)
                                         else "")
                    last = msg
                waited = time.monotonic() - start
                if waited + backoff > self.retry_for_s:
                    raise LeaseError(f"controller {self.url} unreachable for {waited:.1f} s "
                                     f"after {tries} tries: {last}", "TESSERA_CONTROLLER_URL")
                time.sleep(backoff)
                backoff = min(5.0, backoff * 2)


def _int_env(env, name, minimum):
    text = env.get(name, "")
    try:
        v = int(text)
    except ValueError:
        raise LeaseError(f"must be an integer >= {minimum}, not {text!r}", name) from None
    if v < minimum:
        raise LeaseError(f"must be >= {minimum}", name)
    return v


def _error_message(data):
    try:
        return json.loads(data)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return data[:200].decode("utf-8", "replace")


def _parse_answer(j):
    chunks = [(int(c["chunk"]), [str(i) for i in c["items"]]) for c in j.get("chunks", [])]
    return {"chunks": chunks, "lease_ms": int(j.get("lease_ms", 0)),
            "finished": bool(j.get("finished", False)),
            "retry_after_ms": int(j.get("retry_after_ms", 0))}


class _LocalLeases:
    """Outside Tessera: rank r of W takes chunks r, r + W, ... of the input."""

    def __init__(self, items, chunk_size, rank, world):
        self.queue = [(n, items[i:i + chunk_size])
                      for n, i in enumerate(range(0, len(items), chunk_size)) if n % world == rank]
        self.held = set()

    def lease(self, completed, max_chunks):
        for c in completed:
            self.held.discard(c["chunk"])
        out = []
        while self.queue and len(self.held) < max_chunks:
            n, items = self.queue.pop(0)
            self.held.add(n)
            out.append((n, items))
        return {"chunks": out, "lease_ms": 0, "finished": not self.queue and not self.held,
                "retry_after_ms": 0}


# ---- the script's side ----

class Item:
    """One leased input and its output. Not shared between threads."""

    def __init__(self, leases, chunk, name, input_path, output_path):
        self._leases = leases
        self._chunk = chunk
        self.name = name                # as the controller listed it
        self.input_path = input_path    # where to read it
        self.output_path = output_path  # where its output goes (see the module doc)
        self.written = False

    def write_bytes(self, data):
        """Writes `data` as the item's output, atomically."""
        self.write_with(_write_bytes_to(bytes(data)))

    def write_with(self, writer):
        """Writes the output through `writer(tmp_path)`, which must create
        tmp_path (e.g. `lambda p: image.save(p, format="PNG")`); then fsync
        and rename. Exceptions of `writer` leave no file."""
        if self.written:
            raise LeaseError(f"output of item {self.name!r} was written already", "item")
        write_atomically(self.output_path, writer)
        self.written = True
        self._leases._item_written(self)

    def __repr__(self):
        return f"Item({self.name!r} -> {self.output_path!r})"


class _Chunk:
    def __init__(self, number):
        self.number = number
        self.pending = set()  # names given or to give, not yet written
        self.written = 0
        self.start = time.monotonic()


class Leases:
    """The items of this rank's leased chunks; see the module docstring.

    Arguments: `data`, the input folder or list file (the job's `dataset`;
    default TESSERA_INFER_DATASET, which Tessera sets on every rank of an
    infer job); `output`, the output folder (the job's `output`; default
    TESSERA_INFER_OUTPUT); `suffix`, the output's
    extension (".png"). `max_chunks`: chunks leased per call. `env`: the
    environment (os.environ). Iterate once, from one thread; the lease
    renewal runs in a background thread of its own.
    """

    def __init__(self, data=None, output=None, suffix=".png", max_chunks=1, env=None,
                 retry_for_s=120.0, request_timeout_s=10.0, local_chunk_size=16):
        env = os.environ if env is None else env
        data = data or env.get("TESSERA_INFER_DATASET")
        output = output or env.get("TESSERA_INFER_OUTPUT")
        if not data:
            raise LeaseError("the input folder or list file (the job's dataset) is required",
                             "data")
        if not output:
            raise LeaseError("the output folder (the job's output) is required", "output")
        if not suffix.startswith(".") or suffix != suffix.lower():
            raise LeaseError('must be a lower-case extension such as ".png"', "suffix")
        self.data_root = data if os.path.isdir(data) else os.path.dirname(os.path.abspath(data))
        self.output = output
        self.suffix = suffix
        self.max_chunks = max(1, min(64, int(max_chunks)))
        self.local = not env.get("TESSERA_JOB_ID")
        if self.local:
            rank = int(env.get("RANK", "0") or 0)
            world = max(1, int(env.get("WORLD_SIZE", "1") or 1))
            self._source = _LocalLeases(list_input_items(data, exclude_dir=output),
                                        local_chunk_size, rank, world)
        else:
            self._source = _HttpLeases(env, retry_for_s, request_timeout_s)
        self._buffer = []          # items to give, in order
        self._chunks = {}          # chunk number -> _Chunk (held, not done)
        self._completed = []       # reports not yet sent
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._keeper = None
        self._renew_error = None
        self._finished = False
        self.written = 0           # outputs this rank wrote
        self.skipped = 0           # items whose output existed

    # -- iteration --

    def __iter__(self):
        while True:
            item = self._next(wait=True)
            if item is None:
                return
            yield item

    def batches(self, size):
        """Lists of up to `size` items; a batch may span chunks, and is cut
        short rather than wait while the rest of the job is held elsewhere."""
        if size < 1:
            raise LeaseError("must be >= 1", "size")
        batch = []
        while True:
            item = self._next(wait=not batch)
            if item is None:
                if not batch:
                    return
                yield batch
                batch = []
                continue
            batch.append(item)
            if len(batch) == size:
                yield batch
                batch = []

    def close(self):
        """Reports finished chunks and stops renewing. Idempotent."""
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join()
            self._keeper = None
        with self._mu:
            completed, self._completed = self._completed, []
        if completed:
            self._source.lease(completed, 0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- internals --

    def _unwritten(self):
        # Called with an empty buffer: every pending item was given.
        return [n for c in self._chunks.values() for n in c.pending]

    def _next(self, wait):
        while True:
            if self._buffer:
                return self._buffer.pop(0)
            if self._finished:
                return None
            if wait:
                given = self._unwritten()
                if given:
                    raise LeaseError(
                        f"item {sorted(given)[0]!r} was given to the script but its output was "
                        "never written; write every item's output (item.write_bytes / "
                        "item.write_with) before asking for more", "item")
            if self._renew_error is not None:
                raise self._renew_error
            with self._mu:
                completed, self._completed = self._completed, []
                held = len(self._chunks)
            answer = self._source.lease(completed, min(64, held + self.max_chunks))
            fresh = False
            for number, names in answer["chunks"]:
                if number in self._chunks:
                    continue  # held already: the controller sends held chunks first
                fresh = self._take_chunk(number, names) or fresh
            if answer["lease_ms"] > 0 and self._keeper is None:
                self._start_keeper(answer["lease_ms"])
            if fresh:
                continue
            if answer["finished"] and not self._chunks:
                self._finished = True
                return None
            if not wait:
                return None
            time.sleep(max(0.05, answer["retry_after_ms"] / 1000.0))

    def _take_chunk(self, number, names):
        """Queues the chunk's items whose outputs are missing; True if any."""
        c = _Chunk(number)
        items = []
        for name in names:
            path = name if os.path.isabs(name) else os.path.join(self.data_root, name)
            items.append(Item(self, c, name, path,
                              output_path_for(self.output, self.data_root, name, self.suffix)))
        remove_stale_temps([i.output_path for i in items])
        for i in items:
            if os.path.exists(i.output_path):
                self.skipped += 1
            else:
                c.pending.add(i.name)
                self._buffer.append(i)
        with self._mu:
            if c.pending:
                self._chunks[number] = c
                return True
            self._completed.append({"chunk": number, "images": 0, "seconds": 0.0})
            return False

    def _item_written(self, item):
        c = item._chunk
        self.written += 1
        report = None
        with self._mu:
            c.pending.discard(item.name)
            c.written += 1
            if c.pending or self._chunks.get(c.number) is not c:
                return
            del self._chunks[c.number]
            self._completed.append({"chunk": c.number, "images": c.written,
                                    "seconds": round(time.monotonic() - c.start, 3)})
            if self._buffer:  # no lease call is coming soon: report now
                report, self._completed = self._completed, []
        if report:
            self._source.lease(report, 0)

    def _start_keeper(self, lease_ms):
        interval = max(0.1, lease_ms / 3000.0)

        def renew():
            warned = False
            while not self._stop.wait(interval):
                try:
                    self._source.lease([], 0)
                except AttemptEnded as e:
                    self._renew_error = e
                    return
                except LeaseError as e:
                    if not warned:
                        warned = True
                        print(f"tessera_lease: renewing leases failed: {e}", file=sys.stderr)

        self._keeper = threading.Thread(target=renew, name="tessera-lease-renew", daemon=True)
        self._keeper.start()
