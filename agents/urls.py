from django.urls import path

from agents.apis import (
    actions,
    context,
    conversations,
    deltas,
    erasures,
    evidence,
    exports,
    facts,
    feedback,
    identity,
    jobs,
    knowledge,
    lessons,
    outcomes,
    recall,
    situations,
    skills,
    tool_calls,
    tools,
)

app_name = "agents"

urlpatterns = [
    path("agents/me/", identity.WhoAmIApi.as_view(), name="whoami"),
    # knowledge, recall, conversations, tool calls
    path("knowledge/", knowledge.KnowledgeCollectionApi.as_view(), name="knowledge"),
    path("knowledge/batch/", knowledge.KnowledgeBatchApi.as_view(), name="knowledge-batch"),
    path(
        "knowledge/<int:item_id>/", knowledge.KnowledgeDetailApi.as_view(), name="knowledge-detail"
    ),
    path("recall/", recall.RecallApi.as_view(), name="recall"),
    path(
        "sessions/<str:session_id>/turns/",
        conversations.SessionTurnsApi.as_view(),
        name="session-turns",
    ),
    path(
        "conversations/search/",
        conversations.ConversationSearchApi.as_view(),
        name="conversations-search",
    ),
    path("tool-calls/", tool_calls.ToolCallsApi.as_view(), name="tool-calls"),
    path("tool-calls/stats/", tool_calls.ToolCallStatsApi.as_view(), name="tool-calls-stats"),
    # outcomes, evidence, context, lessons
    path("outcomes/", outcomes.OutcomeCreateApi.as_view(), name="outcome-create"),
    path("evidence/", evidence.EvidenceCreateApi.as_view(), name="evidence-create"),
    path("context/", context.ContextApi.as_view(), name="context"),
    path("lessons/", lessons.LessonsApi.as_view(), name="lessons"),
    path("lessons/check/", context.LessonCheckApi.as_view(), name="lesson-check"),
    path("actions/check/", actions.ActionCheckApi.as_view(), name="action-check"),
    path(
        "actions/checks/<int:check_id>/answer/",
        actions.ActionAnswerApi.as_view(),
        name="action-answer",
    ),
    path("lessons/<int:lesson_id>/", lessons.LessonDetailApi.as_view(), name="lesson-detail"),
    path(
        "lessons/<int:lesson_id>/retire/", lessons.LessonRetireApi.as_view(), name="lesson-retire"
    ),
    path(
        "lessons/<int:lesson_id>/history/",
        lessons.LessonHistoryApi.as_view(),
        name="lesson-history",
    ),
    # situations: blockers the agent cannot fix
    path("situations/", situations.SituationDeclareApi.as_view(), name="situations"),
    path(
        "situations/classify/",
        situations.SituationClassifyApi.as_view(),
        name="situations-classify",
    ),
    path("situations/known/", situations.KnownSituationsApi.as_view(), name="situations-known"),
    path("turns/<path:turn_id>/results/", situations.TurnResultsApi.as_view(), name="turn-results"),
    # skills, deltas, tools, feedback, facts
    path("skills/", skills.SkillRegisterApi.as_view(), name="skill-register"),
    path("skills/<str:name>/", skills.SkillDetailApi.as_view(), name="skill-detail"),
    path("skills/<str:name>/deltas/", deltas.SkillDeltasApi.as_view(), name="skill-deltas"),
    path(
        "skills/<str:name>/effective/", skills.EffectiveSkillApi.as_view(), name="skill-effective"
    ),
    path("agents/me/tools/", tools.AgentToolsApi.as_view(), name="agent-tools"),
    path("feedback/", feedback.FeedbackApi.as_view(), name="feedback"),
    path("facts/<str:namespace>/", facts.FactListApi.as_view(), name="fact-list"),
    path("facts/<str:namespace>/<str:key>/", facts.FactApi.as_view(), name="fact-detail"),
    # admin: exports, erasures, jobs
    path("exports/", exports.ExportStartApi.as_view(), name="exports"),
    path(
        "exports/<int:job_id>/download/",
        exports.ExportDownloadApi.as_view(),
        name="export_download",
    ),
    path("erasures/", erasures.ErasureStartApi.as_view(), name="erasures"),
    path("erasures/preview/", erasures.ErasurePreviewApi.as_view(), name="erasures_preview"),
    path("jobs/", jobs.JobStartApi.as_view(), name="jobs"),
    path("jobs/<int:job_id>/", jobs.JobApi.as_view(), name="job"),
]
