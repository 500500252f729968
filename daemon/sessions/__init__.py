"""Edit sessions: the session file format, typing real files as a person would, recording and headless replay."""
