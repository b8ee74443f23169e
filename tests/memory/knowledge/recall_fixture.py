"""A small recall-quality fixture: short facts, each with a paraphrased question.

Shared by tests/memory/knowledge/test_recall.py (hit@3 threshold) and the knowledge benchmark
(a check that fusion weights tuned on LoCoMo do not lose paraphrase recall).
"""

FACTS = [
    (
        "The production database runs PostgreSQL 16 on a dedicated host",
        "which SQL server version is prod on",
    ),
    (
        "Sarah Chen prefers meetings in the morning, never before 9",
        "when does Sarah like to have calls",
    ),
    ("Our CI pipeline runs on GitHub Actions", "where do the automated builds execute"),
    (
        "The office wifi password is kept in the team vault",
        "where can I find the network login for the office",
    ),
    (
        "Deploys to staging happen every night at 2 AM UTC",
        "what time is the nightly release to the test environment",
    ),
    ("The mobile app is written in Kotlin and Swift", "what languages are used for the phone apps"),
    ("Tom is allergic to peanuts", "does Tom have any food allergies"),
    (
        "The quarterly planning meeting is in the last week of March",
        "when is the Q2 roadmap session",
    ),
    (
        "Invoices must be approved by finance before payment",
        "who signs off bills before they are paid",
    ),
    (
        "The user's favourite editor theme is Solarized Dark",
        "which colour scheme does the user like in the IDE",
    ),
    ("Backups are stored in an S3 bucket in eu-west-1", "where are the database snapshots kept"),
    ("The company holiday party is on December 15th", "when is the end of year celebration"),
    ("Maria speaks Spanish, English and Portuguese", "which languages can Maria talk in"),
    (
        "The API rate limit is 100 requests per minute per token",
        "how many calls per minute can a client make",
    ),
    ("Our logo uses the colour teal, hex 008080", "what is the brand colour"),
    (
        "The on-call rotation changes every Monday at 10 AM",
        "when does the pager duty handover happen",
    ),
    ("The user drinks oat milk in coffee", "what kind of milk does the user take"),
    (
        "Python code is formatted with ruff, line length 100",
        "which formatter and width do we use for python",
    ),
    ("The dog's name is Biscuit and she is a beagle", "what is the pet called"),
    (
        "Expense reports are due on the 5th of each month",
        "deadline for submitting reimbursement claims",
    ),
    ("The marketing site is hosted on Netlify", "where is the public website deployed"),
    ("Alex works remotely from Lisbon", "in which city is Alex based"),
    ("Two reviewers must approve every pull request", "how many approvals does a code change need"),
    ("The user is vegetarian and avoids fish", "dietary restrictions for the user"),
    ("Error logs are shipped to Grafana Loki", "where do we search application logs"),
    (
        "The conference talk is scheduled for June 3rd in Berlin",
        "when and where is the presentation",
    ),
    (
        "Secrets are injected through environment variables from Vault",
        "how do services receive credentials",
    ),
    ("The user's daughter plays the violin", "which instrument does the user's child play"),
    ("The support inbox is answered within 24 hours", "how fast do we reply to customer emails"),
    ("Feature flags are managed with LaunchDarkly", "what tool toggles features on and off"),
    ("The user runs 10 km every Saturday morning", "what exercise does the user do at weekends"),
    ("Our main competitor is Acme Analytics", "who is the biggest rival company"),
    ("The test suite takes about 12 minutes to run", "how long do the tests need"),
    ("The user's birthday is on the 4th of July", "when should we celebrate the user's birthday"),
    ("Kubernetes clusters are upgraded every quarter", "how often do we update the k8s version"),
    ("The design system lives in a Figma library", "where are the UI components drawn"),
    ("Priya leads the data engineering team", "who manages the data platform engineers"),
    ("The user hates notifications after 8 PM", "does the user want alerts in the evening"),
    ("Customer data must stay in the EU region", "where may client records be stored"),
    ("The user is learning Japanese with a tutor", "which foreign language is the user studying"),
]
