//! Tool retrieval (`docs/tools.md`, "Retrieval"): with hundreds of tools, offer the model
//! only the top N for the user's intent.
//!
//! The lexical score is Okapi BM25 (k1 = 1.2, b = 0.75) over each tool's name and description,
//! with the name counted twice (names are short and decisive). The tokenizer is deterministic:
//! Unicode lowercase, split at anything not alphanumeric and at camelCase humps
//! (`RemoteBash` → `remote`, `bash`), so every binding ranks the same way.
//!
//! The host may add a semantic score without a callback across the FFI: it passes owned values
//! with the query ([`HostScores`]): scores it computed itself, or the query's embedding to
//! compare with tool embeddings it stored earlier ([`ToolIndex::set_embedding`]). Both are
//! blended with the lexical score normalised to [0, 1].

use std::collections::HashMap;

use super::spec::ToolSpec;

/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// BM25 length normalisation.
const B: f64 = 0.75;

/// The words of `text`: lowercase, split at non-alphanumerics and camelCase humps; single
/// ASCII letters and digits (the `s` of `what's`) are dropped as noise.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = split_words(text);
    tokens.retain(|t| !(t.len() == 1 && t.is_ascii()));
    tokens
}

fn split_words(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut prev: Option<char> = None;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            prev = None;
            continue;
        }
        // A hump: lower/digit → Upper starts a word (`remoteBash`, `v2Api`).
        let hump = c.is_uppercase() && prev.is_some_and(|p| p.is_lowercase() || p.is_numeric());
        if hump && !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        word.extend(c.to_lowercase());
        prev = Some(c);
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

#[derive(Debug, Clone)]
struct Doc {
    name: String,
    tf: HashMap<String, u32>,
    len: f64,
}

/// A ranked tool. JSON: `{"name", "score"}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scored {
    /// The tool.
    pub name: String,
    /// Its score (BM25 alone, or the blend in [0, 1]).
    pub score: f64,
}

/// A semantic score from the host, passed by value with the query. JSON: `"none"`,
/// `{"scores": {"name": 0.8, ...}}` (in that order), `{"query_embedding": [0.1, ...]}`.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostScores {
    /// Lexical only.
    #[default]
    None,
    /// The host's own scores in [0, 1] by tool name (missing tools score 0).
    Scores(#[serde(with = "pairs_as_map")] Vec<(String, f64)>),
    /// The query's embedding; cosine similarity with each tool's stored embedding, mapped
    /// from [-1, 1] to [0, 1] (tools without one score 0). It must have the stored
    /// embeddings' dimension ([`EmbeddingError`]).
    QueryEmbedding(Vec<f32>),
}

/// An embedding the index cannot compare: refused rather than scored 0 in silence, which
/// would hide a host that switched embedding models or stored a vector under a misspelt name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddingError {
    /// [`ToolIndex::set_embedding`] for a tool the index does not hold.
    #[error("no tool named {0:?} is in the index")]
    UnknownTool(String),
    /// An embedding without values.
    #[error("the embedding has no values")]
    Empty,
    /// A value that is NaN or infinite.
    #[error("value {at} of the embedding is not a finite number")]
    NotFinite {
        /// Its index.
        at: usize,
    },
    /// An embedding whose dimension differs from the ones stored.
    #[error("the embedding has {got} values; this index's embeddings have {expected}")]
    Dimension {
        /// The stored embeddings' dimension.
        expected: usize,
        /// The one given.
        got: usize,
    },
    /// A query embedding for an index that holds none to compare it with.
    #[error("no tool has an embedding to compare the query's with (set_embedding first)")]
    NoEmbeddings,
}

/// An embedding's values checked: some, all finite.
fn check_values(values: &[f32]) -> Result<(), EmbeddingError> {
    if values.is_empty() {
        return Err(EmbeddingError::Empty);
    }
    match values.iter().position(|v| !v.is_finite()) {
        Some(at) => Err(EmbeddingError::NotFinite { at }),
        None => Ok(()),
    }
}

/// Name → score pairs as a JSON object, keeping their order.
mod pairs_as_map {
    use serde::de::{MapAccess, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(pairs: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, f64)>, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = Vec<(String, f64)>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of tool names to scores")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                Ok(pairs)
            }
        }
        d.deserialize_map(Pairs)
    }
}

/// The search index over a set of tools.
#[derive(Debug, Clone, Default)]
pub struct ToolIndex {
    docs: Vec<Doc>,
    df: HashMap<String, u32>,
    avg_len: f64,
    embeddings: HashMap<String, Vec<f32>>,
}

impl ToolIndex {
    /// Indexes `tools` (e.g. [`super::Registry::specs`] or an agent's visible tools).
    pub fn new(tools: &[&ToolSpec]) -> ToolIndex {
        let mut index = ToolIndex::default();
        for spec in tools {
            let mut tokens = tokenize(&spec.name);
            tokens.extend(tokenize(&spec.name));
            tokens.extend(tokenize(&spec.description));
            let mut tf = HashMap::new();
            for t in &tokens {
                *tf.entry(t.clone()).or_insert(0) += 1;
            }
            for t in tf.keys() {
                *index.df.entry(t.clone()).or_insert(0) += 1;
            }
            index.docs.push(Doc {
                name: spec.name.clone(),
                tf,
                len: tokens.len() as f64,
            });
        }
        let total: f64 = index.docs.iter().map(|d| d.len).sum();
        index.avg_len = if index.docs.is_empty() {
            0.0
        } else {
            total / index.docs.len() as f64
        };
        index
    }

    /// Stores the embedding of tool `name` (replacing its earlier one). Every embedding of an
    /// index has one dimension, the first one's; a tool the index does not hold, an empty
    /// embedding and a value that is not finite are refused too.
    pub fn set_embedding(&mut self, name: &str, embedding: Vec<f32>) -> Result<(), EmbeddingError> {
        if !self.docs.iter().any(|d| d.name == name) {
            return Err(EmbeddingError::UnknownTool(name.to_owned()));
        }
        check_values(&embedding)?;
        if let Some((_, other)) = self.embeddings.iter().find(|(n, _)| *n != name)
            && other.len() != embedding.len()
        {
            return Err(EmbeddingError::Dimension {
                expected: other.len(),
                got: embedding.len(),
            });
        }
        self.embeddings.insert(name.to_owned(), embedding);
        Ok(())
    }

    /// BM25 of every tool for `query`, in index order.
    pub fn bm25(&self, query: &str) -> Vec<Scored> {
        let n = self.docs.len() as f64;
        let mut terms = tokenize(query);
        terms.sort();
        terms.dedup();
        self.docs
            .iter()
            .map(|doc| {
                let score = terms
                    .iter()
                    .filter_map(|t| {
                        let f = f64::from(*doc.tf.get(t)?);
                        let df = f64::from(self.df[t]);
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        let norm = K1 * (1.0 - B + B * doc.len / self.avg_len.max(1.0));
                        Some(idf * f * (K1 + 1.0) / (f + norm))
                    })
                    .sum();
                Scored {
                    name: doc.name.clone(),
                    score,
                }
            })
            .collect()
    }

    /// The `n` best tools for `query` (ties by name), with lexical scores only; tools that
    /// share no word with the query are left out.
    pub fn top_n(&self, query: &str, n: usize) -> Vec<Scored> {
        let mut scored: Vec<Scored> = self
            .bm25(query)
            .into_iter()
            .filter(|s| s.score > 0.0)
            .collect();
        rank(&mut scored, n);
        scored
    }

    /// The `n` best tools, blending BM25 (normalised by the best score) with the host's
    /// score: `lexical_weight * lexical + (1 - lexical_weight) * host`. A query embedding the
    /// stored ones cannot be compared with is refused ([`EmbeddingError`]).
    pub fn top_n_hybrid(
        &self,
        query: &str,
        n: usize,
        host: &HostScores,
        lexical_weight: f64,
    ) -> Result<Vec<Scored>, EmbeddingError> {
        if let HostScores::QueryEmbedding(q) = host {
            check_values(q)?;
            let stored = self.embeddings.values().next();
            let expected = stored.ok_or(EmbeddingError::NoEmbeddings)?.len();
            if q.len() != expected {
                return Err(EmbeddingError::Dimension {
                    expected,
                    got: q.len(),
                });
            }
        }
        let lexical = self.bm25(query);
        let best = lexical.iter().map(|s| s.score).fold(0.0, f64::max);
        let w = lexical_weight.clamp(0.0, 1.0);
        let host_score = |name: &str| -> f64 {
            match host {
                HostScores::None => 0.0,
                HostScores::Scores(list) => list
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0.0, |(_, s)| s.clamp(0.0, 1.0)),
                HostScores::QueryEmbedding(q) => self
                    .embeddings
                    .get(name)
                    .and_then(|e| cosine(q, e))
                    .map_or(0.0, |c| (c + 1.0) / 2.0),
            }
        };
        let mut scored: Vec<Scored> = lexical
            .into_iter()
            .map(|s| {
                let lex = if best > 0.0 { s.score / best } else { 0.0 };
                let score = w * lex + (1.0 - w) * host_score(&s.name);
                Scored {
                    name: s.name,
                    score,
                }
            })
            .filter(|s| s.score > 0.0)
            .collect();
        rank(&mut scored, n);
        Ok(scored)
    }
}

fn rank(scored: &mut Vec<Scored>, n: usize) {
    scored.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.name.cmp(&b.name))
    });
    scored.truncate(n);
}

fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    (na > 0.0 && nb > 0.0).then(|| dot / (na.sqrt() * nb.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Registry;
    use serde_json::json;

    #[test]
    fn tokenizer() {
        assert_eq!(tokenize("RemoteBash"), ["remote", "bash"]);
        assert_eq!(
            tokenize("fs.read_file v2Api"),
            ["fs", "read", "file", "v2", "api"]
        );
        assert_eq!(
            tokenize("HTTPServer naïve Ünïcode"),
            ["httpserver", "naïve", "ünïcode"]
        );
        assert!(tokenize(" -- ").is_empty());
        assert_eq!(tokenize("what's a 日"), ["what", "日"]);
    }

    fn index() -> (ToolIndex, Vec<ToolSpec>) {
        let mut specs: Vec<ToolSpec> = Registry::with_builtins()
            .specs()
            .into_iter()
            .cloned()
            .collect();
        for (name, description) in [
            ("get_weather", "Current weather and forecast for a city."),
            ("send_email", "Send an email message to a recipient."),
            (
                "search_email",
                "Search the mailbox for email messages matching words.",
            ),
            ("calendar_add", "Add an event to the calendar."),
        ] {
            specs.push(ToolSpec::new(name, description, json!({"type": "object"})).unwrap());
        }
        let refs: Vec<&ToolSpec> = specs.iter().collect();
        (ToolIndex::new(&refs), specs)
    }

    #[test]
    fn lexical_ranking() {
        let (idx, _) = index();
        // No stop words: "the" matches other descriptions too, but weakly (low IDF, long
        // documents). The shell tools' descriptions are long and say "the" several times
        // (their exit-marker rule), so the margin is 1.5x, not more.
        let top = idx.top_n("what's the weather in Taipei?", 3);
        assert_eq!(top[0].name, "get_weather");
        assert!(top[0].score > 1.5 * top[1].score, "{top:?}");
        let names: Vec<String> = idx.top_n("email", 5).into_iter().map(|s| s.name).collect();
        assert_eq!(names.len(), 2);
        assert!(names.contains(&"send_email".to_string()));
        assert_eq!(
            idx.top_n("run it on the remote machine", 1)[0].name,
            "RemoteBash"
        );
        assert_eq!(idx.top_n("read the file notes.txt", 1)[0].name, "read");
        assert!(idx.top_n("zzz", 5).is_empty());
        assert_eq!(idx.top_n("email", 1).len(), 1);
    }

    #[test]
    fn embeddings_the_index_cannot_compare_are_refused() {
        let (mut idx, _) = index();
        assert_eq!(
            idx.set_embedding("sendemail", vec![1.0]),
            Err(EmbeddingError::UnknownTool("sendemail".into()))
        );
        assert_eq!(
            idx.set_embedding("send_email", vec![]),
            Err(EmbeddingError::Empty)
        );
        assert_eq!(
            idx.set_embedding("send_email", vec![0.5, f32::INFINITY]),
            Err(EmbeddingError::NotFinite { at: 1 })
        );
        idx.set_embedding("send_email", vec![1.0, 0.0]).unwrap();
        assert_eq!(
            idx.set_embedding("calendar_add", vec![1.0, 0.0, 0.0]),
            Err(EmbeddingError::Dimension {
                expected: 2,
                got: 3
            })
        );
        // The only embedding may be replaced by one of another dimension (a new model).
        idx.set_embedding("send_email", vec![1.0, 0.0, 0.0])
            .unwrap();
        idx.set_embedding("calendar_add", vec![0.0, 1.0, 0.0])
            .unwrap();
    }

    #[test]
    fn host_scores_and_embeddings_blend_in() {
        let (mut idx, _) = index();
        // Lexically nothing matches "meeting"; the host knows calendar_add is about it.
        let host = HostScores::Scores(vec![
            ("calendar_add".into(), 0.9),
            ("send_email".into(), 0.2),
        ]);
        let top = idx.top_n_hybrid("schedule meeting", 2, &host, 0.5).unwrap();
        assert_eq!(top[0].name, "calendar_add");
        assert!((top[0].score - 0.45).abs() < 1e-9, "{top:?}");
        let q = HostScores::QueryEmbedding(vec![0.9, 0.1]);
        assert_eq!(
            idx.top_n_hybrid("schedule meeting", 2, &q, 0.0),
            Err(EmbeddingError::NoEmbeddings)
        );
        idx.set_embedding("calendar_add", vec![1.0, 0.0]).unwrap();
        idx.set_embedding("send_email", vec![0.0, 1.0]).unwrap();
        let top = idx.top_n_hybrid("schedule meeting", 2, &q, 0.0).unwrap();
        assert_eq!(top[0].name, "calendar_add");
        assert_eq!(top[1].name, "send_email");
        // A query of another dimension cannot be compared: refused, not scored 0 in silence.
        let bad = HostScores::QueryEmbedding(vec![1.0, 0.0, 0.0]);
        assert_eq!(
            idx.top_n_hybrid("schedule meeting", 2, &bad, 0.0),
            Err(EmbeddingError::Dimension {
                expected: 2,
                got: 3
            })
        );
        let nan = HostScores::QueryEmbedding(vec![1.0, f32::NAN]);
        assert_eq!(
            idx.top_n_hybrid("x", 2, &nan, 0.0),
            Err(EmbeddingError::NotFinite { at: 1 })
        );
        // Pure lexical weight ignores the host.
        let top = idx.top_n_hybrid("weather", 1, &host, 1.0).unwrap();
        assert_eq!((top[0].name.as_str(), top[0].score), ("get_weather", 1.0));
    }
}
