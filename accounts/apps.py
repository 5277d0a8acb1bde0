from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts (teams)"

    def ready(self) -> None:
        # Connects the sign-in throttle's receivers (user_login_failed, user_logged_in).
        from accounts import backends  # noqa: F401
