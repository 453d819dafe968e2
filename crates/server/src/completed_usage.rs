//! The usage of an Images stream's `*.completed` events, whichever way the upstream counts it.
//!
//! OpenAI does not document how a stream of `n` > 1 images reports usage. Its events can carry
//! the request's usage so far (the last event the whole request's, as the simulator does and as
//! the gateway's own subscription streams do), or each image's own. The two are told apart by
//! the numbers: the images of one request share their size and quality, so each costs the same
//! output tokens. Running totals therefore grow at every event (never falling in any count, the
//! output rising), while the usages of single images repeat. So the events are taken as running
//! totals while every one grows over the one before, and added up otherwise; one event means the
//! same either way. A stream known to carry running totals (the gateway's own, for subscription
//! accounts) is not guessed at: an image whose call reported no usage repeats the total, which the
//! numbers alone would take for single images' usages.

use imagegate_domain::Usage;

/// What the completed events of one stream said so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CompletedUsage {
    last: Option<Usage>,
    sum: Usage,
    running_totals: bool,
    known_running_totals: bool,
}

impl CompletedUsage {
    /// The events are known to carry running totals: the last one is the stream's usage.
    pub fn know_running_totals(&mut self) {
        self.known_running_totals = true;
    }

    /// One more completed event's usage.
    pub fn push(&mut self, usage: &Usage) {
        self.running_totals = self.known_running_totals
            || match self.last {
                None => true,
                Some(last) => self.running_totals && grows(&last, usage),
            };
        self.last = Some(*usage);
        self.sum = self.sum.saturating_add(*usage);
    }

    /// The stream's usage: the last running total, or the sum of the images' own; `None` before
    /// any event said anything.
    pub fn total(&self) -> Option<Usage> {
        let last = self.last?;
        Some(if self.running_totals { last } else { self.sum })
    }
}

/// Whether `next` can be a running total following `last`.
fn grows(last: &Usage, next: &Usage) -> bool {
    next.input_tokens >= last.input_tokens
        && next.total_tokens >= last.total_tokens
        && next.output_tokens > last.output_tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            ..Usage::default()
        }
    }

    fn total_of(events: &[Usage]) -> Option<(u64, u64)> {
        let mut completed = CompletedUsage::default();
        for event in events {
            completed.push(event);
        }
        completed.total().map(|u| (u.input_tokens, u.output_tokens))
    }

    #[test]
    fn known_running_totals_are_taken_at_their_last_even_when_one_repeats() {
        // The second image's call reported no usage, so the gateway's own total did not grow.
        let events = [usage(30, 1000), usage(30, 1000), usage(60, 2000)];
        let mut known = CompletedUsage::default();
        known.know_running_totals();
        for event in &events {
            known.push(event);
        }
        assert_eq!(
            known.total().map(|u| (u.input_tokens, u.output_tokens)),
            Some((60, 2000))
        );
        // Guessed from the numbers, the repeat reads as single images' usages.
        assert_eq!(total_of(&events), Some((120, 4000)));
    }

    #[test]
    fn running_totals_are_taken_at_their_last() {
        // The simulator's way: the input once, the output image by image.
        assert_eq!(
            total_of(&[usage(3, 272), usage(3, 544), usage(3, 816)]),
            Some((3, 816))
        );
        // The subscription streams': each call's input too.
        assert_eq!(total_of(&[usage(30, 1000), usage(60, 2000)]), Some((60, 2000)));
    }

    #[test]
    fn each_image_s_own_usage_is_added_up() {
        assert_eq!(total_of(&[usage(3, 272), usage(3, 272)]), Some((6, 544)));
        // The input reported with the first image only.
        assert_eq!(total_of(&[usage(3, 272), usage(0, 272)]), Some((3, 544)));
    }

    #[test]
    fn one_event_or_none() {
        assert_eq!(total_of(&[usage(3, 272)]), Some((3, 272)));
        assert_eq!(total_of(&[]), None);
    }

    #[test]
    fn a_break_in_the_growth_makes_the_whole_stream_a_sum() {
        // Once an event does not grow, no event was a running total.
        assert_eq!(
            total_of(&[usage(3, 272), usage(3, 544), usage(3, 544)]),
            Some((9, 1360))
        );
    }
}
