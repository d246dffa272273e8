"""The golden transcript of slotlock's DynamoDB requests (issue 32, item 5): scenario, recorder, normaliser."""
