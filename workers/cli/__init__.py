"""The operator CLI (`memsync ...`): commands, their errors and display, replay, the demo."""
