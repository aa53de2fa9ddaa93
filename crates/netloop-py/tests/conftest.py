"""The child-pytest test uses pytest's own ``pytester`` fixture."""

pytest_plugins = ["pytester"]
