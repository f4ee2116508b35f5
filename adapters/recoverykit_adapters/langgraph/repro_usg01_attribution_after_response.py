#!/usr/bin/env python3
"""Stand-alone reproduction (no recoverykit): LangChain can name a provider attempt only after it answered.

recoverykit findings USG-01, FA-04, USG-04 (scenarios fair_queueing, provider_faults): an attempt in flight
when the worker was killed has no receipt naming it. ``ChatOpenAI`` sends no request id of its own, and the
callbacks see the first id of the attempt (the response's ``chatcmpl-...`` id) in ``on_llm_end``, after the
provider has answered and billed it. A process killed between the answer and that callback leaves no record
that names the attempt, so its usage cannot be accounted for; only a header the application adds itself
(``extra_headers``) fixes an attribution before dispatch.

    python repro_usg01_attribution_after_response.py   # exit 1 and "REPRODUCED"
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from langchain_core.callbacks import BaseCallbackHandler
from langchain_openai import ChatOpenAI

SEEN = {}


class Provider(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        SEEN["request_headers"] = {k.lower(): v for k, v in self.headers.items()}
        body = json.dumps({"id": "chatcmpl-42", "object": "chat.completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": "hi"}}],
                           "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}}).encode()
        SEEN["answered"] = True  # billed: from here on the usage exists at the provider
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Ids(BaseCallbackHandler):
    def on_chat_model_start(self, serialized, messages, **kwargs):
        SEEN["ids_before_dispatch"] = [v for k, v in kwargs.items() if k.endswith("id") and v is not None]

    def on_llm_end(self, response, **kwargs):
        SEEN["first_provider_id"] = (response.llm_output or {}).get("id")


def main():
    server = HTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    llm = ChatOpenAI(model="m", base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="x", max_retries=0)
    llm.invoke("hello", config={"callbacks": [Ids()]})
    server.shutdown()
    header = SEEN["request_headers"].get("x-request-id")
    print(f"X-Request-Id sent: {header!r}; ids the callbacks had before dispatch: {SEEN['ids_before_dispatch']} "
          f"(LangChain's own run ids, unknown to the provider); first provider id: {SEEN['first_provider_id']!r}, "
          "seen in on_llm_end, after the provider answered")
    if header is None and SEEN["first_provider_id"]:
        print("REPRODUCED: no id the provider knows exists before the attempt is answered")
        sys.exit(1)
    print("not reproduced")


if __name__ == "__main__":
    main()
