-- The bot's voice in Slack (SlackPostRecorded events): what was posted where, so that a post is
-- never made twice, and the directory of Slack threads that alerts opened (a reply in such a
-- thread joins its incident). Threads are keyed by (channel, ts): new thread keys carry their
-- channel (`C0123-1773458070.000100`); rows projected before keep their plain ts and stay readable.
CREATE TABLE IF NOT EXISTS slack_posts (
    post_id       text        NOT NULL,                 -- the posted event's message id
    phase         text        NOT NULL CHECK (phase IN ('intent', 'posted', 'found')),
    thread_ts     text        NOT NULL,                 -- the incident's thread key
    channel       text        NOT NULL,
    slack_ts      text,                                 -- NULL for an intent
    root          boolean     NOT NULL,                 -- this post opened the Slack thread
    recorded_at   timestamptz NOT NULL,
    PRIMARY KEY (post_id, phase)
);
CREATE INDEX IF NOT EXISTS slack_posts_thread ON slack_posts (thread_ts);
-- The directory: a Slack thread root -> the incident it belongs to.
CREATE INDEX IF NOT EXISTS slack_posts_root ON slack_posts (channel, slack_ts)
    WHERE root AND phase <> 'intent';
