//! Reading the console's pages as a browser would: its cookies and its forms' CSRF tokens.

/// The value of cookie `name` set by `response`.
pub fn set_cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.split(';').next())
        .unwrap_or_else(|| panic!("no {name} cookie"))
        .to_owned()
}

/// The CSRF token of the first form on `page`.
pub fn csrf_of(page: &str) -> String {
    let start = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    page[start..].split('"').next().unwrap().to_owned()
}
