"""Governance evidence: quota compliance, queue and service, failures, capacity verdict."""
