"""A small fake Tinker-API server for tests: the part of the wire protocol the `tinker` client (0.38) speaks for
one LoRA training client — client config, session, heartbeats, create_model/get_info, forward_backward (protobuf
in and out), optim_step, save/load state, save_weights_for_sampler, asample — with futures answered on the
first retrieve_future poll. Its "model" is trivial and deterministic: every sample is SAMPLE_TEXT's tokens,
every target token has log-probability TARGET_LOGPROB, and `loss:sum` is what the datums received say
(minus the sum of the advantages). It records every request (path, key header, decoded body) and can answer
every request with one HTTP status or stall every request for a bounded time. Hostile modes: samples of other
tokens (`sample_tokens`), another number of samples than asked (`sample_count`), log-probabilities shorter
than the targets (`logprobs_short_by`) and a path's result replaced by any JSON (`replaced_results`); a test
turns them on mid-run from `on_request`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from _http_serving import send
from tinker.proto import tinker_public_pb2 as pb

SAMPLE_TEXT = "42"
TARGET_LOGPROB = -1.0
STALL_LIMIT_S = 30.0  # a stalled request answers 503 after this, so that no test thread outlives its test


def _array(tensor: Any) -> list:
    """A proto Tensor's values (dense, as the client writes the datums' inputs)."""
    dtype = {pb.DTYPE_FLOAT32: np.float32, pb.DTYPE_INT64: np.int64, pb.DTYPE_INT32: np.int32}[tensor.dtype]
    return np.frombuffer(tensor.dense, dtype).tolist()


def decode_forward_backward(body: bytes) -> dict[str, Any]:
    """The forward_backward request as plain data: loss, config, forward_only and per datum its input tokens
    and loss inputs."""
    message = pb.ForwardBackwardRequest.FromString(body)
    data = [{"input_tokens": np.concatenate([np.frombuffer(chunk.encoded_text.tokens, np.int32)
                                             for chunk in datum.model_input]).tolist(),
             "loss_fn_inputs": {key: _array(value) for key, value in datum.loss_fn_inputs.items()}}
            for datum in message.data]
    return {"model_id": message.model_id, "loss_fn": message.loss_fn, "forward_only": message.forward_only,
            "loss_fn_config": dict(message.loss_fn_config), "data": data}


class FakeTinker(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tokenizer_folder: Path, sample_tokens: list[int], echo_key: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), TinkerHandler)
        self.tokenizer_folder = tokenizer_folder  # get_info's tokenizer_id: the client loads it from disk
        self.sample_tokens = sample_tokens
        self.requests: list[tuple[str, dict[str, Any]]] = []  # (path, decoded body), in arrival order
        self.api_keys: list[str] = []  # the X-API-Key header of each request
        self.fail_status: int | None = None  # answer every request with this status
        self.echo_key = echo_key  # repeat the key in every error's detail (is it redacted?)
        self.stall = threading.Event()  # set: every request waits (bounded) and then answers 503
        self.sample_count: int | None = None  # answer this many samples, whatever num_samples asks
        self.logprobs_short_by = 0  # each datum's log-probabilities this many fewer than its target tokens
        self.replaced_results: dict[str, Any] = {}  # path -> the JSON its future answers instead of its own
        self.on_request: Callable[[str], None] | None = None  # called with each request's path first
        self.results: dict[str, tuple[str, bytes]] = {}  # future id -> (content type, body)
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for seen, body in self.requests if seen == f"/api/v1/{path}"]

    def future(self, result: dict[str, Any] | bytes) -> dict[str, Any]:
        """A request id whose first poll answers `result` (protobuf bytes or JSON)."""
        with self.lock:
            request_id = f"future-{len(self.results)}"
            self.results[request_id] = (("application/x-protobuf", result) if isinstance(result, bytes)
                                        else ("application/json", json.dumps(result).encode()))
        return {"request_id": request_id, "model_id": "model-0"}

    def answer(self, path: str, body: dict[str, Any]) -> tuple[str, bytes] | dict[str, Any] | None:
        """The reply to one request: (content type, body), a JSON object, or None for a path not served."""
        name = path.removeprefix("/api/v1/")
        if name == "retrieve_future":
            return self.results[body["request_id"]]
        if name in self.replaced_results:
            return self.future(self.replaced_results[name])
        if name == "forward_backward":
            return self.future(forward_backward_output(body, self.logprobs_short_by))
        if name == "asample":
            count = body["num_samples"] if self.sample_count is None else self.sample_count
            sequence = pb.SampledSequence(stop_reason=pb.STOP_REASON_STOP,
                                          tokens=np.asarray(self.sample_tokens, np.int32).tobytes())
            reply = self.future(pb.SampleResponse(sequences=[sequence] * count).SerializeToString())
            return {**reply, "sample_sequence_ids": [f"seq-{i}" for i in range(count)]}
        futures = {
            "create_model": {"model_id": "model-0"},
            "optim_step": {"metrics": {}},
            "save_weights": {"path": f"tinker://model-0/weights/{body.get('path')}"},
            "load_weights": {"path": body.get("path"), "model_id": "model-0"},
            "save_weights_for_sampler": {"sampling_session_id": "sampler-0"},
        }
        if name in futures:
            return self.future(futures[name])
        if name.startswith("sessions/") and name.endswith("/finish"):
            return {}
        immediate: dict[str, dict[str, Any]] = {
            "client/config": {"use_pyqwest_transport": False},
            "client/dynamic_config": {},
            "create_session": {"session_id": "session-0"},
            "session_heartbeat": {},
            "telemetry": {"status": "accepted"},
            "get_info": {"model_id": "model-0", "is_lora": True, "lora_rank": 0,
                         "model_data": {"model_name": "fake", "tokenizer_id": str(self.tokenizer_folder)}},
        }
        return immediate.get(name)


def forward_backward_output(request: dict[str, Any], short_by: int = 0) -> bytes:
    """TARGET_LOGPROB per target token (`short_by` fewer per datum), and `loss:sum` = -(sum of the advantages)
    (the ppo loss at ratio 1)."""
    lengths = [max(len(datum["loss_fn_inputs"]["target_tokens"]) - short_by, 0) for datum in request["data"]]
    values = np.full(sum(lengths), TARGET_LOGPROB, np.float32)
    offsets = np.cumsum([0, *lengths]).astype(np.int64) * 4
    record = pb.ArrayRecord(num_datums=len(lengths), fields={"logprobs": pb.BatchedTensor(
        data=values.tobytes(), offsets=offsets.tobytes(), dtype=pb.DTYPE_FLOAT32)})
    loss = -sum(sum(datum["loss_fn_inputs"].get("advantages", [])) for datum in request["data"])
    return pb.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord", loss_fn_outputs=[record],
                                    metrics={"loss:sum": loss}).SerializeToString()


class TinkerHandler(BaseHTTPRequestHandler):
    server: FakeTinker

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle(b"")

    def do_POST(self) -> None:
        self._handle(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def _handle(self, raw: bytes) -> None:
        server, path = self.server, self.path.split("?")[0]
        if self.headers.get("Content-Type") == "application/x-protobuf":
            body = decode_forward_backward(raw)
        else:
            body = json.loads(raw) if raw else {}
        with server.lock:
            server.requests.append((path, body))
            server.api_keys.append(self.headers.get("X-API-Key", ""))
        if server.on_request is not None:
            server.on_request(path)
        if server.stall.is_set():
            deadline = time.monotonic() + STALL_LIMIT_S
            while server.stall.is_set() and time.monotonic() < deadline:
                time.sleep(0.05)
            self._json(503, {"detail": "stalled"})
        elif server.fail_status is not None:
            echoed = f" for key {self.headers.get('X-API-Key')}" if server.echo_key else ""
            self._json(server.fail_status, {"detail": f"scripted failure {server.fail_status}{echoed}"})
        else:
            reply = server.answer(path, body)
            if reply is None:
                self._json(404, {"detail": f"the fake Tinker server does not serve {path}"})
            elif isinstance(reply, tuple):
                send(self, 200, *reply)
            else:
                self._json(200, reply)

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        send(self, status, "application/json", json.dumps(payload).encode())
