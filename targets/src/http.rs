//! The http kind: POSTs the payload to an upstream service.
//! Settings: `{"url": "https://service/hook", "headers": {"x-team": "pds"}}` (headers optional).

use std::collections::BTreeMap;

use serde::Deserialize;
use url::Url;

use crate::json::JsonError;
use crate::{Kind, Settings};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

impl HttpSettings {
    /// The URL, parsed; [`Settings::check`] has made sure it parses and is http(s).
    pub fn parsed_url(&self) -> Result<Url, JsonError> {
        let url = Url::parse(&self.url)
            .map_err(|e| JsonError::at("url", format!("{:?} is not a URL: {e}", self.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(JsonError::at(
                "url",
                format!(
                    "{:?} has scheme '{}'; expected http or https",
                    self.url,
                    url.scheme()
                ),
            ));
        }
        Ok(url)
    }

    /// Where the upstream lives (scheme, host and port): an upstream down is down for every path.
    pub fn origin(&self) -> String {
        match Url::parse(&self.url) {
            Ok(url) => url.origin().ascii_serialization(),
            Err(_) => self.url.clone(),
        }
    }
}

impl Settings for HttpSettings {
    const KIND: Kind = Kind::Http;

    fn check(&self) -> Result<(), JsonError> {
        self.parsed_url()?;
        for (name, value) in &self.headers {
            let path = format!("headers.{name}");
            http::HeaderName::try_from(name.as_str())
                .map_err(|e| JsonError::at(&path, format!("{name:?} is not a header name: {e}")))?;
            http::HeaderValue::try_from(value.as_str()).map_err(|e| {
                JsonError::at(&path, format!("{value:?} is not a header value: {e}"))
            })?;
        }
        Ok(())
    }
}
