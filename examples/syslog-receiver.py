"""
An example syslog daemon for docs/logging.md and the syslog plugin's tests: binds a Unix datagram socket,
as /dev/log is, and prints each message it receives as one line on stdout (a newline inside a message
shows as \\n). It says where it listens on stderr.
    python3 examples/syslog-receiver.py PATH
A socket left at PATH by an earlier run is replaced; SIGTERM or SIGINT removes it and exits 0.
"""
import os
import signal
import socket
import stat
import sys

path = sys.argv[1]
if os.path.exists(path) and stat.S_ISSOCK(os.stat(path).st_mode):
    os.unlink(path)
receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
receiver.bind(path)


def stop(*_):
    os.unlink(path)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
print(f"example syslog receiver listening on {path}", file=sys.stderr, flush=True)
while True:
    message = receiver.recv(1 << 20).decode("utf-8", "replace")
    print(message.replace("\n", "\\n"), flush=True)
