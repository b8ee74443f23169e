"""Import an export file into this workspace from the Export page (admins only).

The same service as `manage.py import_export`: only into an empty workspace, in
one transaction, audited (``export.import``) under the admin's name, answered
with the report (rows per table, references remapped and dropped).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.template.defaultfilters import filesizeformat
from django.views.decorators.http import require_POST

from cairn.errors import ApplicationError
from memory.privacy.imports import export_import, workspace_is_empty
from reviews.access import actor_for, require_role
from reviews.htmx import redirect_back, render_action, wants_fragment


def import_context(request, **extra) -> dict:
    workspace = request.workspace
    return {
        # A callable: the template asks only when it renders the import form.
        "import_empty": lambda: workspace_is_empty(workspace=workspace),
        "import_max": settings.CAIRN_IMPORT_MAX_BYTES,
        **extra,
    }


def _answer(request, *, report=None, error: str = "", status: int = 200):
    if wants_fragment(request):
        context = import_context(request, import_report=report, import_error=error)
        return render_action(request, "reviews/exports.html#import_form", context, status=status)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, " ".join(report.lines()))
    return redirect_back("reviews:exports")


@require_role
@require_POST
def exports_import(request):
    upload = request.FILES.get("file")
    if upload is None:
        return _answer(request, error="Choose an export file to import.", status=422)
    if upload.size > settings.CAIRN_IMPORT_MAX_BYTES:
        limit = filesizeformat(settings.CAIRN_IMPORT_MAX_BYTES)
        return _answer(
            request,
            error=f"The file is larger than {limit}; import it with "
            "`manage.py import_export FILE WORKSPACE` instead.",
            status=422,
        )
    suffix = ".jsonl" if upload.name.endswith(".jsonl") else ".json"
    with tempfile.TemporaryDirectory(prefix="cairn-import-") as directory:
        path = Path(directory) / f"upload{suffix}"
        with open(path, "wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        try:
            report = export_import(workspace=request.workspace, path=path, actor=actor_for(request))
        except ApplicationError as exc:
            return _answer(request, error=exc.message, status=422)
    return _answer(request, report=report)
