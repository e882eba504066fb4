"""Reverse mode: the dual-numbers reverse transform (Smeding & Vakar, POPL 2023) and the
code specialised for float arguments."""
