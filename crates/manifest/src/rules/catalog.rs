//! Every rule the checker knows, with its stable id, severity, summary and fix hint.

use crate::finding::Severity;

macro_rules! catalog {
    ($( $variant:ident = $id:literal, $severity:ident, $summary:literal, $hint:literal; )*) => {
        /// A rule of the checker. The id (`R-...`) is stable across releases; the severity of a rule
        /// never changes within a major version.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $(
                #[doc = $summary]
                $variant,
            )*
        }

        impl Rule {
            /// Every rule, in catalog order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The stable id, e.g. `R-SKILL-DUP-NAME`.
            pub fn id(self) -> &'static str {
                match self { $(Rule::$variant => $id,)* }
            }

            /// The severity of every finding of this rule (without `--strict`, see [`Rule::severity_in`]).
            pub fn severity(self) -> Severity {
                match self { $(Rule::$variant => Severity::$severity,)* }
            }

            /// One sentence on what the rule checks.
            pub fn summary(self) -> &'static str {
                match self { $(Rule::$variant => $summary,)* }
            }

            /// The general fix; findings may carry a more specific hint.
            pub fn hint(self) -> &'static str {
                match self { $(Rule::$variant => $hint,)* }
            }
        }
    };
}

catalog! {
    JsonSyntax = "R-JSON-SYNTAX", Error,
        "The file is not valid JSON (RFC 8259).",
        "Fix the JSON at the position shown.";
    JsonBom = "R-JSON-BOM", Error,
        "The file starts with a byte order mark.",
        "Save the file as UTF-8 without BOM.";
    JsonUtf8 = "R-JSON-UTF8", Error,
        "The file is not valid UTF-8.",
        "Re-encode the file as UTF-8.";
    JsonComment = "R-JSON-COMMENT", Error,
        "The file contains a comment; JSON has none.",
        "Remove the comment.";
    JsonTrailingComma = "R-JSON-TRAILING-COMMA", Error,
        "A comma stands directly before `]` or `}`.",
        "Remove the trailing comma.";
    JsonDepth = "R-JSON-DEPTH", Error,
        "Arrays and objects are nested deeper than the parser allows (128).",
        "A manifest needs four levels; flatten the data.";
    JsonDupKey = "R-JSON-DUP-KEY", Error,
        "An object has the same key twice (JSON parsers silently keep one of them).",
        "Keep one of the two members.";
    SchemaRequired = "R-SCHEMA-REQUIRED", Error,
        "A required key is missing.",
        "Add the key; see docs/manifest.md for the fields of each object.";
    SchemaType = "R-SCHEMA-TYPE", Error,
        "A value has the wrong JSON type.",
        "Use the type the format defines for this field.";
    SchemaConstraint = "R-SCHEMA-CONSTRAINT", Error,
        "A value breaks a constraint of the JSON Schema that no more specific rule explains.",
        "Change the value to satisfy the schema constraint named in the message.";
    FormatForeign = "R-FORMAT-FOREIGN", Error,
        "The file is a neighbouring catalog format, not a registry manifest.",
        "Generate a registry manifest (`registry-check generate`) instead of checking this file.";
    TopSchemaVersion = "R-TOP-SCHEMA-VERSION", Error,
        "`schema_version` is not a version this checker supports (\"1\" or \"1.<minor>\").",
        "Write \"1\" (or \"1.<minor>\").";
    UnknownKey = "R-UNKNOWN-KEY", Warning,
        "An object has a key the format does not define (kept for forward compatibility).",
        "Remove the key or fix its spelling.";
    TopGeneratedAt = "R-TOP-GENERATED-AT", Error,
        "`generated_at` is not an RFC 3339 timestamp with an explicit offset.",
        "Write a time such as 2026-05-01T12:00:00Z.";
    TopGeneratedFuture = "R-TOP-GENERATED-FUTURE", Warning,
        "`generated_at` lies in the future.",
        "Check the clock of the machine that generated the manifest.";
    RepoGitUrl = "R-REPO-GIT-URL", Error,
        "`repository.git_url` is not an https, http, ssh or scp-style (git@host:owner/repo.git) URL.",
        "Write the clone URL, e.g. https://github.com/owner/repo.git.";
    RepoGitUrlHttp = "R-REPO-GIT-URL-HTTP", Warning,
        "`repository.git_url` uses plain http.",
        "Use https.";
    RepoRawBaseUrl = "R-REPO-RAW-BASE-URL", Error,
        "`repository.raw_base_url` is not an absolute https URL without query, fragment or user info.",
        "Write the URL files are served from, e.g. https://raw.githubusercontent.com/owner/repo/main.";
    RepoBranch = "R-REPO-BRANCH", Error,
        "`repository.branch` is not a valid git branch name.",
        "Use a branch name without spaces, `..`, `~^:?*[\\`, `@{`, and not ending in `/` or `.lock`.";
    RepoBranchUrl = "R-REPO-BRANCH-URL", Warning,
        "`repository.branch` is not a path segment of `raw_base_url`.",
        "Make `raw_base_url` point at the same branch.";
    RepoName = "R-REPO-NAME", Warning,
        "`repository.name` differs from the repository part of `git_url`.",
        "Use the repository's name as in its clone URL.";
    FieldBlank = "R-FIELD-BLANK", Error,
        "A required text field is empty or only whitespace.",
        "Write a meaningful value.";
    SkillName = "R-SKILL-NAME", Error,
        "A skill name breaks the agentskills naming rules (1-64 of `a-z`, `0-9`, `-`; no leading, trailing or double `-`).",
        "Use lowercase letters, digits and single hyphens, e.g. `pdf-tools`.";
    SkillDupName = "R-SKILL-DUP-NAME", Error,
        "Two skills have the same name.",
        "Rename one of the skills or remove the duplicate entry.";
    SkillFolderName = "R-SKILL-FOLDER-NAME", Error,
        "The last segment of a skill's `path` differs from its `name` (agent runtimes install by folder name).",
        "Rename the folder or the skill so they match.";
    SkillVersion = "R-SKILL-VERSION", Error,
        "A skill version is not a SemVer 2.0 version (MAJOR.MINOR.PATCH).",
        "Write a full version such as 1.0.0.";
    SkillDescLong = "R-SKILL-DESC-LONG", Error,
        "A skill description is longer than 1024 characters (agentskills limit).",
        "Shorten the description; put details into SKILL.md.";
    SkillSha256 = "R-SKILL-SHA256", Error,
        "`sha256` is not 64 lowercase hex digits.",
        "Write the bare lowercase hex SHA-256 of the package file.";
    SkillDupPackage = "R-SKILL-DUP-PACKAGE", Error,
        "Two skills name the same package.",
        "Give every skill its own package file.";
    SkillPackageExt = "R-SKILL-PACKAGE-EXT", Error,
        "A package is not a `.zip` file.",
        "Pack the skill as a .zip archive.";
    SkillDupPath = "R-SKILL-DUP-PATH", Error,
        "Two skills share the same `path`.",
        "Give every skill its own folder.";
    SkillSize = "R-SKILL-SIZE", Error,
        "`size_bytes` is not a non-negative integer written as digits and at most 2^53-1.",
        "Write the file length in bytes as a plain integer, e.g. 1234.";
    SkillSizeMissing = "R-SKILL-SIZE-MISSING", Warning,
        "A skill has no `size_bytes`, so installers cannot check the download length.",
        "Add `size_bytes` with the package file's length.";
    SkillAgentUnknown = "R-SKILL-AGENT-UNKNOWN", Warning,
        "A skill names an agent this checker does not know.",
        "Use one of the known agent names or check the spelling.";
    SkillUpdatedAt = "R-SKILL-UPDATED-AT", Error,
        "`updated_at` is not an RFC 3339 timestamp with an explicit offset.",
        "Write a time such as 2026-05-01T12:00:00Z.";
    SkillUpdatedAfter = "R-SKILL-UPDATED-AFTER", Warning,
        "A skill's `updated_at` is later than the manifest's `generated_at`.",
        "Regenerate the manifest or correct the timestamp.";
    ListBlank = "R-LIST-BLANK", Error,
        "A list item (tags, agents, api_docs, source_urls) is empty or only whitespace.",
        "Remove the empty item.";
    ListDup = "R-LIST-DUP", Error,
        "A list of tags, agents or api_docs repeats an item.",
        "Remove the repeated item.";
    ApiId = "R-API-ID", Error,
        "An API id is not a slug (1-64 of `a-z`, `0-9`, `-`; no leading, trailing or double `-`).",
        "Use lowercase letters, digits and single hyphens, e.g. `images-api`.";
    ApiDupId = "R-API-DUP-ID", Error,
        "Two API entries have the same id.",
        "Give every API entry its own id.";
    ApiLanguage = "R-API-LANGUAGE", Error,
        "`language` is not a well-formed BCP 47 language tag.",
        "Write a tag such as en, zh or zh-CN (hyphen, not underscore).";
    ApiDupPath = "R-API-DUP-PATH", Error,
        "Two API entries share the same `path`.",
        "Give every API document its own file.";
    ApiPathExt = "R-API-PATH-EXT", Warning,
        "An API document's path does not end in `.md`.",
        "Publish API documents as Markdown files.";
    ApiSourceUrl = "R-API-SOURCE-URL", Error,
        "A source URL is not an absolute http(s) URL.",
        "Write the full URL of the source, starting with https://.";
    ApiSourceHttp = "R-API-SOURCE-HTTP", Warning,
        "A source URL uses plain http.",
        "Use https.";
    ApiSourceDup = "R-API-SOURCE-DUP", Warning,
        "An API entry lists the same source URL twice.",
        "Remove the repeated URL.";
    XrefApiDoc = "R-XREF-API-DOC", Error,
        "A skill's `api_docs` item names no `apis[].id`.",
        "Use the id of an entry in `apis`, or add that entry.";
    XrefApiUnused = "R-XREF-API-UNUSED", Info,
        "No skill references this API entry in `api_docs`.",
        "Reference it from the skills that use it, or leave it as a stand-alone document.";
    PathAbsolute = "R-PATH-ABSOLUTE", Error,
        "A path is absolute, has a drive letter or a URL scheme.",
        "Write the path relative to the repository root, e.g. skills/pdf-tools.";
    PathBackslash = "R-PATH-BACKSLASH", Error,
        "A path contains a backslash.",
        "Use `/` as the separator.";
    PathParent = "R-PATH-PARENT", Error,
        "A path contains a `..` segment.",
        "Point inside the repository without `..`.";
    PathDotSegment = "R-PATH-DOT-SEGMENT", Warning,
        "A path has an empty or `.` segment (`a//b`, `./a`, trailing `/`).",
        "Write the path without empty or `.` segments.";
    PathNfc = "R-PATH-NFC", Error,
        "A path is not in Unicode NFC form, so it differs byte-wise between macOS and other systems.",
        "Normalize the file name to NFC.";
    PathControl = "R-PATH-CONTROL", Error,
        "A path contains a control character (Unicode category Cc, e.g. NUL, tab or newline).",
        "Remove the control character; file names in a manifest hold printable characters only.";
    PathCase = "R-PATH-CASE", Error,
        "Two paths differ only in letter case, which breaks checkouts on macOS and Windows.",
        "Rename one of them so the names differ in more than case.";
    RootPathMissing = "R-ROOT-PATH-MISSING", Error,
        "A skill's `path` is not a folder in the checkout.",
        "Fix the path or add the skill folder.";
    RootSkillMdMissing = "R-ROOT-SKILLMD-MISSING", Error,
        "A skill folder holds no readable SKILL.md (missing, not a regular file inside the checkout, or larger than 1 MiB).",
        "Add SKILL.md with front matter to the folder.";
    RootFrontMatter = "R-ROOT-FRONTMATTER", Error,
        "SKILL.md has no YAML front matter with string `name` and `description`, or it does not parse.",
        "Start SKILL.md with `---`, YAML with `name:` and `description:`, and `---`.";
    RootNameMismatch = "R-ROOT-NAME-MISMATCH", Error,
        "The `name` in SKILL.md differs from the manifest entry or the folder name.",
        "Make the front-matter name, the folder name and the manifest name the same.";
    RootDescMismatch = "R-ROOT-DESC-MISMATCH", Warning,
        "The manifest description is neither equal to nor a prefix of the SKILL.md description.",
        "Regenerate the manifest from SKILL.md.";
    RootFrontMatterKey = "R-ROOT-FRONTMATTER-KEY", Warning,
        "SKILL.md front matter has a key outside the agentskills set.",
        "Move extra data under `metadata:`.";
    RootPackageMissing = "R-ROOT-PACKAGE-MISSING", Error,
        "A package file does not exist in the checkout.",
        "Build and commit the package (`registry-check generate`).";
    RootSizeMismatch = "R-ROOT-SIZE-MISMATCH", Error,
        "`size_bytes` differs from the package file's length.",
        "Regenerate the manifest after rebuilding packages.";
    RootSha256Mismatch = "R-ROOT-SHA256-MISMATCH", Error,
        "`sha256` differs from the SHA-256 of the package file.",
        "Regenerate the manifest after rebuilding packages.";
    RootApiMissing = "R-ROOT-API-MISSING", Error,
        "An API document's `path` is not a file in the checkout.",
        "Fix the path or add the document.";
    PkgOpen = "R-PKG-OPEN", Error,
        "The package is not a readable zip archive.",
        "Rebuild the package as a zip file.";
    PkgUnsafePath = "R-PKG-UNSAFE-PATH", Error,
        "A package entry has an absolute path or a `..` segment (zip slip).",
        "Rebuild the package with relative entry names only.";
    PkgDupEntry = "R-PKG-DUP-ENTRY", Error,
        "Two package entries have the same name, so an unpacker keeps only one of them and the checker may not see the other.",
        "Rebuild the package so every entry name occurs once.";
    PkgSymlink = "R-PKG-SYMLINK", Error,
        "A package entry is a symbolic link.",
        "Replace the link with the file it points to.";
    PkgLimits = "R-PKG-LIMITS", Error,
        "The package has too many entries or unpacks to too many bytes (zip bomb guard).",
        "Keep packages small; ship large data separately.";
    PkgNoSkillMd = "R-PKG-NO-SKILLMD", Error,
        "The package holds no SKILL.md at its root or under `<name>/`.",
        "Pack the skill folder so SKILL.md is at the archive root or in `<name>/`.";
    PkgStale = "R-PKG-STALE", Warning,
        "The SKILL.md inside the package differs from the one in the checkout.",
        "Rebuild the package (`registry-check generate`).";
    PkgJunk = "R-PKG-JUNK", Warning,
        "The package contains junk files (__MACOSX/, .DS_Store, __pycache__, *.pyc, node_modules/).",
        "Rebuild the package without these files.";
    PkgNotReproducible = "R-PKG-NOT-REPRODUCIBLE", Info,
        "The package was not built reproducibly (unsorted entries or varying timestamps).",
        "Build packages with `registry-check generate` for byte-identical rebuilds.";
}

impl Rule {
    /// Whether `--strict` reports this rule's findings as errors: the rules the format marks "(w), or
    /// errors under `--strict`" (unknown keys, kept as warnings for forward compatibility).
    pub fn is_error_under_strict(self) -> bool {
        matches!(self, Rule::UnknownKey)
    }

    /// The severity of this rule's findings in a run with (`strict`) or without `--strict`.
    pub fn severity_in(self, strict: bool) -> Severity {
        if strict && self.is_error_under_strict() {
            Severity::Error
        } else {
            self.severity()
        }
    }

    /// The rule with this id, if any.
    pub fn from_id(id: &str) -> Option<Rule> {
        Rule::ALL.iter().copied().find(|r| r.id() == id)
    }

    /// Rules whose findings mean the file could not be parsed (exit code 2).
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            Rule::JsonSyntax
                | Rule::JsonBom
                | Rule::JsonUtf8
                | Rule::JsonComment
                | Rule::JsonTrailingComma
                | Rule::JsonDepth
        )
    }
}
