"""A loopback SMTP server for the report tests, on Debian's python3-aiosmtpd.

usage: /usr/bin/python3 tests/smtp/server.py PORT MAILDIR [MODE]

MODE decides how the end of DATA is answered:
  store  (default) store the message in MAILDIR, answer 250;
  stall  store it, then wait 30 s before answering 250: the message is delivered but the client
         does not know yet (a client killed meanwhile left a delivered message behind);
  reject answer 554 and store nothing;
  hangup store it, then close the connection without answering.

Prints "ready" on stdout once it accepts connections; runs until killed.
"""

import asyncio
import mailbox
import signal
import sys

from aiosmtpd.controller import Controller


class Handler:
    def __init__(self, maildir, mode):
        self.box = mailbox.Maildir(maildir, create=True)
        self.mode = mode

    async def handle_DATA(self, server, session, envelope):
        if self.mode == "reject":
            return "554 5.6.0 rejected by the test server"
        self.box.add(envelope.original_content or envelope.content)
        if self.mode == "stall":
            await asyncio.sleep(30)
        elif self.mode == "hangup":
            server.transport.abort()
        return "250 2.0.0 stored"


def main():
    port, maildir = int(sys.argv[1]), sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "store"
    controller = Controller(Handler(maildir, mode), hostname="127.0.0.1", port=port)
    controller.start()
    print("ready", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    controller.stop()


if __name__ == "__main__":
    main()
