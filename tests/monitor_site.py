"""A stand-in drths site for the monitor's tests: telemetry frames and control datagrams in the
formats of common/platform/telemetry.h, authenticated with the monitor key derived from a link key
(keyed BLAKE2b, as the sites and drths-monitor do). Found on PYTHONPATH like checks.py."""

import hashlib
import hmac
import json
import socket
import time

# The public rehearsal key (protocol/crypto.h): BLAKE2b-256 of this sentence.
REHEARSAL_PSK = hashlib.blake2b(
    b"drths rehearsal key v1: public, for localhost rehearsal only", digest_size=32).digest()


def monitor_key(psk):
    return hashlib.blake2b(b"drths monitor v1", key=psk, digest_size=32).digest()


def _mac(key, domain, head, body=b""):
    h = hashlib.blake2b(key=key, digest_size=32)
    h.update(domain + b"\0")
    h.update(head)
    h.update(body)
    return h.hexdigest().encode()


def seal_frame(key, site, epoch, seq, ack, fields):
    """One telemetry datagram: the authenticated header line, then the JSON frame."""
    frame = {"v": 1, "site": site}
    frame.update(fields)
    body = (json.dumps(frame, separators=(",", ":")) + "\n").encode()
    head = f"drths-telemetry 2 {site} {epoch} {seq} {ack} ".encode()
    return head + _mac(key, b"drths telemetry v2", head, body) + b"\n" + body


def seal_control(key, site, epoch, ctr, cmd):
    head = f"drths-control 2 {site} {epoch} {ctr} {cmd} ".encode()
    return head + _mac(key, b"drths control v2", head) + b"\n"


def open_control(key, data):
    """The fields of an authentic control datagram, or None."""
    line = data.rstrip(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 7 or parts[0] != b"drths-control" or parts[1] != b"2":
        return None
    head = line[: len(line) - len(parts[6])]
    if not hmac.compare_digest(_mac(key, b"drths control v2", head), parts[6]):
        return None
    return {"site": parts[2].decode(), "epoch": int(parts[3]), "ctr": int(parts[4]),
            "cmd": parts[5].decode()}


class Site:
    """A site's telemetry socket: sends frames with its epoch, sequence and ACK, and executes a
    control datagram once (as the real site: a CTR above the last, for its name and epoch)."""

    def __init__(self, name, monitor, key, bind="127.0.0.1"):
        host, port = monitor.rsplit(":", 1)
        self.name, self.key = name, key
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((bind, 0))
        self.sock.connect((host, int(port)))
        self.epoch = time.time_ns()
        self.seq = 0
        self.ack = 0
        self.executed = []   # commands executed, in order
        self.received = 0    # authentic control datagrams received (retransmissions included)

    def addr(self):
        return "%s:%d" % self.sock.getsockname()

    def send(self, **fields):
        data = seal_frame(self.key, self.name, self.epoch, self.seq, self.ack, fields)
        self.seq += 1
        try:
            self.sock.send(data)
        except OSError:
            pass
        return data

    def handle(self, data):
        """One control datagram: 1 if authentic and fresh (executed, or a retransmission of the
        last one), else 0."""
        c = open_control(self.key, data)
        if not c or c["site"] != self.name or c["epoch"] != self.epoch or c["ctr"] < self.ack:
            return 0
        self.received += 1
        if c["ctr"] > self.ack:
            self.ack = c["ctr"]
            self.executed.append(c["cmd"])
        return 1

    def poll(self):
        """Reads waiting control datagrams; returns how many were authentic."""
        n = 0
        while True:
            try:
                data = self.sock.recv(512, socket.MSG_DONTWAIT)
            except (BlockingIOError, TimeoutError, ConnectionRefusedError):
                return n
            n += self.handle(data)
