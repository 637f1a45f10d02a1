//! The login page.

use maud::{html, Markup};

pub(in crate::edges::console) const REFUSED: &str = "E-mail ou senha incorretos.";
pub(in crate::edges::console) const THROTTLED: &str =
    "Muitas tentativas de entrada com erro, para esta conta ou deste endereço: espere alguns minutos e tente de novo.";

/// `GET /login`, with a message after a refused attempt; `next` (a local path, checked by the
/// caller) travels in the form, so the login returns there.
pub(in crate::edges::console) fn page(message: Option<&str>, next: Option<&str>) -> Markup {
    super::bare(
        "Entrar",
        html! {
            @if let Some(message) = message { p.error role="alert" { (message) } }
            form.login method="post" action="/login" {
                @if let Some(next) = next { input type="hidden" name="next" value=(super::Attr(next)); }
                label for="email" { "E-mail" }
                input #email type="email" name="email" autocomplete="username" required autofocus;
                label for="password" { "Senha" }
                input #password type="password" name="password" autocomplete="current-password" required;
                button type="submit" { "Entrar" }
            }
        },
    )
}
