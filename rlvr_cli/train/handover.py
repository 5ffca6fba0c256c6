"""What passes between the trainer process and the sampler process of the overlapped mode.

The policy's weights, tagged with their version (version v = the weights after v training steps):
the whole ``state_dict`` of a fully fine-tuned model, only the adapter's tensors of a LoRA policy (the
base weights never change, and both processes load them from the same reference). Messages are
pickled by :mod:`pickle` itself (a tensor's bytes are copied into the message), not by
``multiprocessing``'s pickler, whose tensor reduction hands over shared-memory file descriptors
that only a process started by ``multiprocessing`` can receive.
"""

from __future__ import annotations

import pickle

import torch

from rlvr_cli.train.reference import is_lora


def policy_weights(model) -> dict[str, torch.Tensor]:
    """The tensors that make ``model`` the current policy: its adapter's for a peft model, else its
    whole state dict; detached copies on the CPU (the caller may keep them while training goes on)."""
    if is_lora(model):
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(model)
    else:
        state = model.state_dict()
    return {k: v.detach().to("cpu", copy=True) for k, v in state.items()}


@torch.no_grad()
def load_policy_weights(model, weights: dict[str, torch.Tensor]) -> None:
    """Put ``weights`` (from :func:`policy_weights` of the same kind of model) into ``model``."""
    if is_lora(model):
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, weights)
    else:
        model.load_state_dict(weights)


def send(conn, message: tuple) -> int:
    """Send one message (a tuple whose first item names it) on a ``multiprocessing`` connection;
    returns its size in bytes."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    conn.send_bytes(data)
    return len(data)


def receive(conn) -> tuple:
    """The next message on ``conn`` (blocking); ``EOFError`` when the other end is closed or gone."""
    return pickle.loads(conn.recv_bytes())
