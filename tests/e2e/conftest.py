"""Browser tests: real Chromium driving the app served by daphne."""


def pytest_configure(config):
    # Registered here, beside the tests that use it, so this folder stays self-contained.
    config.addinivalue_line("markers", "e2e: drives the app in a real Chromium (needs /usr/bin/chromium)")
