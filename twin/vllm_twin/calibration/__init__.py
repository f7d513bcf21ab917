"""Calibration data for the twin: the measurement set of public, measured vLLM results.

Modules: `measurements` (load and validate twin/calibration/measurements.yaml, count what it
covers, check its profile names against the twin's catalog).
"""
