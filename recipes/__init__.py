"""The shipped recipes, installed as the package data `rlvr_cli.recipes` (see pyproject.toml).

This file only makes the folder importable so `rlvr recipes show NAME` and the built-in model's warm
start find the recipes from any working directory; the recipes are the YAML files.
"""
