"""mnemo.embeddings.prepare: what a server calls at start; it never fails the start."""

from __future__ import annotations

import logging

import pytest

from mnemo.embeddings import EmbeddingError, NoneEmbedder, Preparable, prepare


class Model:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls = 0

    def prepare(self) -> None:
        self.calls += 1
        if self.error is not None:
            raise self.error


def test_an_embedder_without_a_local_model_has_nothing_to_prepare() -> None:
    assert not isinstance(NoneEmbedder(), Preparable)
    prepare(NoneEmbedder())  # nothing happens, nothing raises


def test_a_local_model_is_prepared_once_per_call() -> None:
    model = Model()
    prepare(model)  # type: ignore[arg-type]
    assert model.calls == 1


@pytest.mark.parametrize("error", [EmbeddingError("model file missing"), RuntimeError("ggml abort")])
def test_a_model_that_cannot_be_prepared_is_logged_and_the_start_goes_on(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    model = Model(error)
    with caplog.at_level(logging.WARNING, logger="mnemo.embeddings.base"):
        prepare(model)  # type: ignore[arg-type]
    assert model.calls == 1
    assert str(error) in caplog.text
