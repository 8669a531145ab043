"""systemd notifications (``READY=1``, ``WATCHDOG=1``, ``STATUS=...``) over ``$NOTIFY_SOCKET``.

A dozen lines of the sd_notify protocol: one datagram per message to the
socket systemd names (``@`` for an abstract socket). Outside systemd, when the
variable is unset, every call does nothing.
"""

from __future__ import annotations

import os
import socket


class Notifier:
    def __init__(self, environ=os.environ):
        addr = environ.get("NOTIFY_SOCKET", "")
        self.address = "\0" + addr[1:] if addr.startswith("@") else addr
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        ok = usec.isdigit() and (not pid or pid == str(os.getpid()))
        self.watchdog_s = int(usec) / 1e6 if ok else None
        """The watchdog interval systemd expects pings within, if it set one."""

    def notify(self, *messages: str) -> bool:
        if not self.address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.connect(self.address)
                s.sendall("\n".join(messages).encode())
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")
