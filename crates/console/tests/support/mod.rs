//! A console over a real SQLite store in a temporary directory, driven with `oneshot` requests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{HeaderMap, Request, StatusCode, header};
use imagegate_console::{ConsoleConfig, ConsoleState, StubBackend, hash_password, router};
use imagegate_store::{
    GroupId, KeyId, MasterKey, NewUser, Store, Timestamp, UsageRecord, User, UserId, connect,
};
use tower::ServiceExt;

pub struct Console {
    pub app: Router,
    pub store: Arc<dyn Store>,
    pub backend: Arc<StubBackend>,
    pub dir: tempfile::TempDir,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }

    /// Every `Set-Cookie` header.
    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    /// The value set for cookie `name`.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.set_cookies().iter().find_map(|c| {
            let pair = c.split(';').next()?;
            let (k, v) = pair.split_once('=')?;
            (k == name).then(|| v.to_owned())
        })
    }

    /// The value of the first hidden `csrf` field.
    pub fn csrf(&self) -> String {
        hidden_field(&self.body, "csrf").expect("a csrf field")
    }
}

/// The value of the first `<input ... name="NAME" value="...">`.
pub fn hidden_field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')?;
    Some(html[start..start + end].to_owned())
}

/// A signed-in browser.
#[derive(Clone)]
pub struct Browser {
    pub cookie: String,
    pub csrf: String,
}

impl Console {
    pub async fn new() -> Self {
        Self::with_config(ConsoleConfig::default()).await
    }

    pub async fn with_config(config: ConsoleConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let master_key = MasterKey::load_or_create(dir.path(), None).unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("imagegate.db").display());
        let store = connect(&url, &master_key).await.unwrap();
        let backend = Arc::new(StubBackend::default());
        let state = ConsoleState::new(store.clone(), backend.clone(), config);
        Self {
            app: router(state),
            store,
            backend,
            dir,
        }
    }

    pub async fn user(&self, name: &str, password: &str, is_admin: bool) -> User {
        let password_hash = Some(hash_password(password).unwrap());
        self.store
            .create_user(NewUser {
                name: name.into(),
                is_admin,
                password_hash,
            })
            .await
            .unwrap()
    }

    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        Reply {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    pub async fn get(&self, path: &str, cookie: Option<&str>) -> Reply {
        let mut request = Request::get(path);
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    pub async fn post(&self, path: &str, cookie: Option<&str>, form: &[(&str, &str)]) -> Reply {
        let body = serde_html_form::to_string(form).unwrap();
        let mut request =
            Request::post(path).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// Posts the login form as a browser would (login cookie + its token).
    pub async fn try_login(&self, name: &str, password: &str) -> Reply {
        let page = self.get("/login", None).await;
        let login_cookie = format!("imagegate_login={}", page.cookie("imagegate_login").unwrap());
        let csrf = page.csrf();
        self.post(
            "/login",
            Some(&login_cookie),
            &[("csrf", &csrf), ("username", name), ("password", password)],
        )
        .await
    }

    pub async fn login(&self, name: &str, password: &str) -> Browser {
        let reply = self.try_login(name, password).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
        let cookie = format!("imagegate_session={}", reply.cookie("imagegate_session").unwrap());
        let keys = self.get("/keys", Some(&cookie)).await;
        assert_eq!(keys.status, StatusCode::OK);
        Browser {
            csrf: keys.csrf(),
            cookie,
        }
    }

    /// Posts a form as a signed-in browser, adding its CSRF token.
    pub async fn submit(&self, browser: &Browser, path: &str, form: &[(&str, &str)]) -> Reply {
        let mut fields = vec![("csrf", browser.csrf.as_str())];
        fields.extend_from_slice(form);
        self.post(path, Some(&browser.cookie), &fields).await
    }

    /// Follows a redirect with a GET.
    pub async fn follow(&self, reply: &Reply, browser: &Browser) -> Reply {
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
        self.get(reply.location(), Some(&browser.cookie)).await
    }

    pub async fn usage(&self, records: Vec<UsageRecord>) {
        self.store.insert_usage_batch(&records).await.unwrap();
    }
}

/// A successful generation record of `user` with `key`.
pub fn record(id: &str, user: UserId, key: KeyId, group: GroupId, images: u32, tokens: u64) -> UsageRecord {
    let mut record = UsageRecord::new(id, "/v1/images/generations", "gpt-image-2");
    record.created_at = Timestamp::now();
    record.user_id = Some(user);
    record.key_id = Some(key);
    record.group_id = Some(group);
    record.images = images;
    record.size_requested = Some("1024x1024".into());
    record.size_produced = Some("1024x1024".into());
    record.quality_produced = Some("low".into());
    record.output_format = Some("png".into());
    record.tokens.input = 10;
    record.tokens.output = tokens - 10;
    record.tokens.total = tokens;
    record.latency_ms = 1500;
    record
}

/// Undoes HTML escaping of text (for comparing rendered snippets with what a user copies).
pub fn unescape(html: &str) -> String {
    html.replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}
