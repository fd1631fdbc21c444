//! The page and its two assets, compiled into the binary: nothing is fetched at run time, from
//! the console's host or anywhere else.

use axum::http::header;
use axum::response::IntoResponse;

/// `no-store`: the page is tiny, and a console upgraded under an open tab must not mix an old
/// script with a new API.
const NO_STORE: (header::HeaderName, &str) = (header::CACHE_CONTROL, "no-store");

pub async fn index() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8"), NO_STORE],
        include_str!("../assets/index.html"),
    )
}

pub async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            NO_STORE,
        ],
        include_str!("../assets/console.js"),
    )
}

pub async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8"), NO_STORE],
        include_str!("../assets/console.css"),
    )
}
