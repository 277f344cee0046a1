"""Tests of python/tessera_lease.py, the lease client of cmd: infer scripts.

The protocol's successful path against the real tesserad is the end-to-end
test (tests/integration/lease_script_e2e_test.cc: its lease tokens exist only
for ranks of a running attempt). Here a small in-process lease server stands
in where a test injects what a real controller does rarely: 500s, a lost
answer, an expired lease handed to another rank, an attempt that ended. It
keeps the controller's rules (api/lease_protocol.h): held chunks are sent
again first and count toward max_chunks; completing is idempotent.
"""

import http.server
import json
import os
import pathlib
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import tessera_lease  # noqa: E402


class FakeController:
    """The lease route of one job: chunks of `chunk_size` items."""

    def __init__(self, items, chunk_size=2, lease_ms=30000, tls_files=None):
        self.chunks = [items[i:i + chunk_size] for i in range(0, len(items), chunk_size)]
        self.done = {}        # chunk -> times reported done
        self.holder = {}      # chunk -> (rank, deadline)
        self.lease_ms = lease_ms
        self.requests = []    # bodies
        self.faults = []      # statuses to answer before serving, in order
        self.drop_answers = 0  # answers computed, then the connection is cut
        self.mu = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, answer, drop = fake.handle(self.path, self.headers, body)
                if drop:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls_files:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls_files)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.scheme = "https" if tls_files else "http"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def env(self, rank=0, **extra):
        e = {"TESSERA_CONTROLLER_URL": f"{self.scheme}://127.0.0.1:{self.server.server_port}",
             "TESSERA_JOB_ID": "7", "TESSERA_ATTEMPT": "1", "RANK": str(rank),
             "TESSERA_LEASE_TOKEN": "secret"}
        e.update(extra)
        return e

    def handle(self, path, headers, body):
        with self.mu:
            self.requests.append(body)
            if path != "/api/v1/jobs/7/leases" or headers["Authorization"] != "Bearer secret":
                return 401, {"error": {"code": "unauthenticated", "message": "bad token"}}, False
            if self.faults:
                status = self.faults.pop(0)
                return status, {"error": {"code": "x", "message": f"injected {status}"}}, False
            rank, now = body["rank"], time.monotonic()
            for c in body["completed"]:
                self.done[c["chunk"]] = self.done.get(c["chunk"], 0) + 1
                self.holder.pop(c["chunk"], None)
            for n, (r, _) in list(self.holder.items()):
                if r == rank:
                    self.holder[n] = (r, now + self.lease_ms / 1000)
            out = [n for n, (r, _) in sorted(self.holder.items()) if r == rank]
            out = out[:body["max_chunks"]]
            for n in range(len(self.chunks)):
                if len(out) >= body["max_chunks"]:
                    break
                h = self.holder.get(n)
                if n in self.done or (h and h[1] > now):
                    continue
                self.holder[n] = (rank, now + self.lease_ms / 1000)
                out.append(n)
            answer = {"chunks": [{"chunk": n, "items": self.chunks[n]} for n in out],
                      "lease_ms": self.lease_ms,
                      "finished": len(self.done) == len(self.chunks),
                      "retry_after_ms": 20}
            drop = self.drop_answers > 0 and out
            if drop:
                self.drop_answers -= 1
            return 200, answer, drop


def make_inputs(root, n):
    names = [f"d/{i:03d}.png" for i in range(n)]
    for name in names:
        p = pathlib.Path(root, name)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(name.encode())
    return names


def run_rank(leases, seen=None):
    for item in leases:
        if seen is not None:
            seen.append(item.name)
        item.write_bytes(b"out:" + pathlib.Path(item.input_path).read_bytes())
    leases.close()


class LeaseClientTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.data = os.path.join(self.tmp.name, "in")
        self.out = os.path.join(self.tmp.name, "out")
        self.items = make_inputs(self.data, 7)

    def tearDown(self):
        self.tmp.cleanup()

    def fake(self, **kw):
        f = FakeController(self.items, **kw)
        self.addCleanup(f.close)
        return f

    def assert_outputs_complete(self):
        files = sorted(str(p.relative_to(self.out)) for p in pathlib.Path(self.out).rglob("*")
                       if p.is_file())
        self.assertEqual(files, sorted(self.items))  # no temporary file either
        for name in self.items:
            self.assertEqual(pathlib.Path(self.out, name).read_bytes(), b"out:" + name.encode())

    def test_every_item_written_once_and_every_chunk_reported_after_its_outputs(self):
        f = self.fake()
        reported_with_outputs = []
        leases = tessera_lease.Leases(self.data, self.out, env=f.env())
        orig = leases._source.lease

        def spy(completed, max_chunks):
            for c in completed:  # when a chunk is reported, its outputs are on disk
                reported_with_outputs.append(all(
                    os.path.exists(os.path.join(self.out, n)) for n in f.chunks[c["chunk"]]))
            return orig(completed, max_chunks)
        leases._source.lease = spy
        seen = []
        run_rank(leases, seen)
        self.assertEqual(sorted(seen), self.items)
        self.assertEqual(f.done, {n: 1 for n in range(4)})
        self.assertTrue(reported_with_outputs and all(reported_with_outputs))
        self.assert_outputs_complete()

    def test_redone_chunk_skips_existing_outputs_and_removes_stale_temps(self):
        f = self.fake()
        os.makedirs(os.path.join(self.out, "d"))
        pathlib.Path(self.out, "d/000.png").write_bytes(b"out:d/000.png")
        stale = pathlib.Path(self.out, "d/.001.png.tmp-99999-3")  # a killed writer's
        stale.write_bytes(b"partial")
        seen = []
        leases = tessera_lease.Leases(self.data, self.out, env=f.env())
        run_rank(leases, seen)
        self.assertNotIn("d/000.png", seen)
        self.assertEqual(leases.skipped, 1)
        self.assertFalse(stale.exists())
        reports = [c for r in f.requests for c in r["completed"] if c["chunk"] == 0]
        self.assertEqual(reports[0]["images"], 1)  # the skipped item is not counted
        self.assert_outputs_complete()

    def test_server_errors_are_retried_and_a_lost_answer_loses_no_chunk(self):
        f = self.fake()
        f.faults = [500, 503, 429]
        f.drop_answers = 1  # chunk 0 leased, its answer never arrives
        run_rank(tessera_lease.Leases(self.data, self.out, env=f.env()))
        self.assertEqual(f.done, {n: 1 for n in range(4)})
        self.assert_outputs_complete()

    def test_errors_name_the_field(self):
        f = self.fake()
        cases = [
            ({"TESSERA_CONTROLLER_URL": "ftp://x"}, "TESSERA_CONTROLLER_URL"),
            ({"TESSERA_ATTEMPT": "0"}, "TESSERA_ATTEMPT"),
            ({"TESSERA_ATTEMPT": "two"}, "TESSERA_ATTEMPT"),
            ({"RANK": ""}, "RANK"),
            ({"TESSERA_LEASE_TOKEN": ""}, "TESSERA_LEASE_TOKEN"),
            ({"TESSERA_CONTROLLER_URL": "https://127.0.0.1:1",
              "TESSERA_CONTROLLER_CA_SHA256": "12:34"}, "TESSERA_CONTROLLER_CA_SHA256"),
            ({"TESSERA_CONTROLLER_URL": "https://127.0.0.1:1",
              "TESSERA_CONTROLLER_CA_FILE": "/nonexistent.pem"}, "TESSERA_CONTROLLER_CA_FILE"),
        ]
        for change, field in cases:
            with self.subTest(field=field, change=change):
                with self.assertRaises(tessera_lease.LeaseError) as e:
                    tessera_lease.Leases(self.data, self.out, env=f.env(**change))
                self.assertEqual(e.exception.field, field)
                self.assertIn(field, str(e.exception))
        with self.assertRaises(tessera_lease.LeaseError) as e:
            run_rank(tessera_lease.Leases(self.data, self.out,
                                          env=f.env(TESSERA_LEASE_TOKEN="wrong")))
        self.assertEqual(e.exception.field, "TESSERA_LEASE_TOKEN")
        self.assertIn("401", str(e.exception))

    def test_ended_attempt_and_unreachable_controller_raise(self):
        f = self.fake()
        f.faults = [409]
        with self.assertRaises(tessera_lease.AttemptEnded):
            run_rank(tessera_lease.Leases(self.data, self.out, env=f.env()))
        f.faults = [500] * 1000
        with self.assertRaises(tessera_lease.LeaseError) as e:
            run_rank(tessera_lease.Leases(self.data, self.out, env=f.env(), retry_for_s=0.5))
        self.assertIn("unreachable", str(e.exception))
        self.assertIn("500", str(e.exception))

    def test_leases_are_renewed_while_the_script_works(self):
        f = self.fake(lease_ms=300)
        leases = tessera_lease.Leases(self.data, self.out, env=f.env(rank=0))
        it = iter(leases)
        first = next(it)
        time.sleep(1.0)  # over three lease periods on one item
        # Another rank asks: the held chunk was renewed, so it gets another one.
        other = tessera_lease.Leases(self.data, os.path.join(self.tmp.name, "other"),
                                     env=f.env(rank=1))
        got = next(iter(other))
        self.assertNotEqual(got.name, first.name)
        self.assertNotIn(got.name, f.chunks[0])
        renewals = [r for r in f.requests if r["rank"] == 0 and r["max_chunks"] == 0]
        self.assertGreaterEqual(len(renewals), 2)
        leases.close()
        other.close()

    def test_an_expired_lease_redone_by_another_rank_still_writes_each_output_once(self):
        f = self.fake(lease_ms=200)
        slow = tessera_lease.Leases(self.data, self.out, env=f.env(rank=0))
        slow._start_keeper = lambda lease_ms: None  # renewal fails: the lease expires
        it = iter(slow)
        first = next(it)
        time.sleep(0.4)
        run_rank(tessera_lease.Leases(self.data, self.out, env=f.env(rank=1)))
        first.write_bytes(b"out:" + first.name.encode())  # the slow rank catches up
        rest = []
        for item in it:  # the rest of its chunk (written again), then the job is finished
            rest.append(item.name)
            item.write_bytes(b"out:" + item.name.encode())
        slow.close()
        self.assertEqual(rest, f.chunks[0][1:])
        self.assertEqual(set(f.done), set(range(4)))
        self.assert_outputs_complete()

    def test_an_item_given_and_never_written_is_an_error_naming_it(self):
        f = self.fake()
        leases = tessera_lease.Leases(self.data, self.out, env=f.env())
        with self.assertRaises(tessera_lease.LeaseError) as e:
            for _ in leases:
                pass
        self.assertEqual(e.exception.field, "item")
        self.assertIn("d/000.png", str(e.exception))
        leases.close()

    def test_batches_span_chunks_and_end_with_the_job(self):
        f = self.fake(chunk_size=2)
        leases = tessera_lease.Leases(self.data, self.out, env=f.env(), max_chunks=1)
        sizes = []
        for batch in leases.batches(3):
            sizes.append(len(batch))
            for item in batch:
                item.write_with(lambda tmp, n=item.name: pathlib.Path(tmp).write_bytes(
                    b"out:" + n.encode()))
        leases.close()
        self.assertEqual(sum(sizes), 7)
        self.assertEqual(max(sizes), 3)
        self.assert_outputs_complete()

    def test_local_run_outside_tessera_splits_chunks_by_rank(self):
        env = {"RANK": "0", "WORLD_SIZE": "2"}
        run_rank(tessera_lease.Leases(self.data, self.out, env=env, local_chunk_size=2))
        written = {str(p.relative_to(self.out)) for p in pathlib.Path(self.out).rglob("*.png")}
        self.assertEqual(written, {"d/000.png", "d/001.png", "d/004.png", "d/005.png"})
        run_rank(tessera_lease.Leases(self.data, self.out, env={"RANK": "1", "WORLD_SIZE": "2"},
                                      local_chunk_size=2))
        self.assert_outputs_complete()

    def test_output_paths_match_the_builtin_infer_job(self):
        cases = [("a/1.png", "/o", "/d", "/o/a/1.png"),
                 ("a/1.jpg", "/o", "/d", "/o/a/1.jpg.png"),
                 ("a/1.PNG", "/o", "/d", "/o/a/1.PNG"),
                 ("/d/x/2.jpeg", "/o", "/d", "/o/x/2.jpeg.png"),
                 ("/elsewhere/3.png", "/o", "/d", "/o/elsewhere/3.png")]
        for item, out, root, want in cases:
            with self.subTest(item=item):
                self.assertEqual(tessera_lease.output_path_for(out, root, item, ".png"), want)
        for bad in ["../x.png", "", "a/../../x.png"]:
            with self.subTest(bad=bad):
                with self.assertRaises(tessera_lease.LeaseError):
                    tessera_lease.output_path_for("/o", "/d", bad, ".png")

    def test_a_failed_writer_leaves_no_file(self):
        path = os.path.join(self.out, "x.png")

        def fails(tmp):
            pathlib.Path(tmp).write_bytes(b"half")
            raise ValueError("encoder broke")
        with self.assertRaises(ValueError):
            tessera_lease.write_atomically(path, fails)
        self.assertEqual(os.listdir(self.out), [])


class HttpsTest(unittest.TestCase):
    """A CA and a server certificate signed by it (chain: leaf then CA), as
    tesserad's self-signed CA serves."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name

        def run(*args):
            subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=test CA")
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=127.0.0.1")
        pathlib.Path(d, "ext").write_text("subjectAltName=IP:127.0.0.1\n")
        run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "ext")
        pathlib.Path(d, "chain.pem").write_text(
            pathlib.Path(d, "leaf.pem").read_text() + pathlib.Path(d, "ca.pem").read_text())
        der = ssl.PEM_cert_to_DER_cert(pathlib.Path(d, "ca.pem").read_text())
        import hashlib
        cls.pin = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
        cls.other_pin = "ab" * 32

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.work = tempfile.TemporaryDirectory()
        self.addCleanup(self.work.cleanup)
        self.data = os.path.join(self.work.name, "in")
        self.out = os.path.join(self.work.name, "out")
        self.items = make_inputs(self.data, 3)
        d = self.tmp.name
        self.f = FakeController(self.items, tls_files=(f"{d}/chain.pem", f"{d}/server.key"))
        self.addCleanup(self.f.close)

    def test_ca_file_and_pin_verify_and_a_wrong_pin_is_refused(self):
        cases = [({"TESSERA_CONTROLLER_CA_FILE": f"{self.tmp.name}/ca.pem"}, None),
                 ({"TESSERA_CONTROLLER_CA_SHA256": self.pin}, None),
                 ({"TESSERA_CONTROLLER_CA_SHA256": "sha256:" + self.pin.replace(":", "")}, None),
                 ({"TESSERA_CONTROLLER_CA_SHA256": self.other_pin},
                  "TESSERA_CONTROLLER_CA_SHA256"),
                 ({}, "TESSERA_CONTROLLER_CA_FILE")]  # the system's trust store lacks it
        for i, (env, error_field) in enumerate(cases):
            with self.subTest(env=env):
                out = os.path.join(self.out, str(i))
                leases = tessera_lease.Leases(self.data, out, env=self.f.env(**env),
                                              retry_for_s=0.3)
                if error_field is None:
                    self.f.done.clear()
                    self.f.holder.clear()
                    run_rank(leases)
                    self.assertEqual(len(list(pathlib.Path(out).rglob("*.png"))), 3)
                else:
                    with self.assertRaises(tessera_lease.LeaseError) as e:
                        run_rank(leases)
                    self.assertIn(error_field, str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
