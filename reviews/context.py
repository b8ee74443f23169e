from reviews.access import current_membership


def workspace(request):
    membership = current_membership(request)
    if membership is None:
        return {"membership": None, "workspace": None, "memberships": []}
    return {
        "membership": membership,
        "workspace": membership.workspace,
        "memberships": request.user.memberships.select_related("workspace").order_by(
            "workspace__name"
        ),
    }
