"""Demand-response events from the grid operator: OpenADR 2.0b and 3.0 VENs beside the control loop."""
