"""Athena refresh job: runs once per schedule slot under slotlock and stores fenced results."""
