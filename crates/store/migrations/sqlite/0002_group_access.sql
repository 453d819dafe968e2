-- Groups open to some users only. A restricted group's keys work for its members and for admins;
-- an open group (every group before this migration) for every user.

ALTER TABLE groups ADD COLUMN restricted BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE group_members (
    group_id INTEGER NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    user_id  INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, user_id)
);

CREATE INDEX group_members_user_id ON group_members (user_id);
