"""pygls' protocol with the gaps closed that would leave an editor waiting or out of sync.

- A request whose params do not parse is answered with InvalidParams (-32602);
  pygls would log it and send nothing.
- A request before `initialize` is answered with ServerNotInitialized (-32002),
  and one after `shutdown` with InvalidRequest (-32600); pygls drops both.
- didOpen/didChange/didClose go to our DocumentStore (LSP line breaks, clamped
  positions) instead of pygls' workspace.
"""
from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcServerNotInitialized
from pygls.protocol import LanguageServerProtocol, lsp_method

logger = logging.getLogger(__name__)


class Unparsable:
    """A request that failed to deserialise; answered with an error instead of dropped."""

    def __init__(self, msg_id: Any, method: str, reason: str) -> None:
        self.id = msg_id
        self.method = method
        self.reason = reason


class TabdProtocol(LanguageServerProtocol):
    initialized = False

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except Exception as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                cause = exc.__cause__ or exc
                return Unparsable(data["id"], str(data.get("method")), f"{type(cause).__name__}: {cause}"[:500])
            raise

    def handle_message(self, message):
        if isinstance(message, Unparsable):
            logger.warning("invalid params for %s: %s", message.method, message.reason)
            err = JsonRpcInvalidParams(f"invalid params for {message.method}: {message.reason}")
            self._send_response(message.id, None, err.to_response_error())
            return
        method = getattr(message, "method", None)
        is_request = method is not None and getattr(message, "id", None) is not None
        if is_request and not self.initialized and method != types.INITIALIZE:
            err = JsonRpcServerNotInitialized(f"{method} before initialize")
            self._send_response(message.id, None, err.to_response_error())
            return
        if is_request and self._shutdown and method != types.EXIT:
            err = JsonRpcInvalidRequest(f"{method} after shutdown")
            self._send_response(message.id, None, err.to_response_error())
            return
        if method == types.INITIALIZE and is_request:
            self.initialized = True
        return super().handle_message(message)

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None
