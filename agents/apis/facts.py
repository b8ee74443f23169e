"""Agent API: tier-0 learned facts and the tools that read them (SPEC sections 6 and 11)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis.common import SKILL_ERRORS, TAG_FACTS, actor, errors
from memory.skills.facts import fact_put
from memory.skills.selectors import fact_consumers, fact_get, fact_list


class FactSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    key = serializers.CharField()
    value = serializers.JSONField()
    scope = serializers.CharField()
    provenance_source = serializers.CharField()
    consumers = serializers.ListField(child=serializers.DictField())
    inert = serializers.BooleanField(help_text="true when no declared tool reads this namespace")
    created_at = serializers.DateTimeField()


def fact_body(fact, consumers: list[dict]) -> dict:
    """A learned fact as the API shows it, with the tools that read it (inert if none)."""
    return {
        "namespace": fact.namespace,
        "key": fact.key,
        "value": fact.value,
        "scope": fact.scope,
        "provenance_source": fact.provenance_source,
        "consumers": consumers,
        "inert": not consumers,
        "created_at": fact.created_at,
    }


class FactApi(APIView):
    class FactPutInputSerializer(serializers.Serializer):
        value = serializers.JSONField()
        scope = serializers.CharField(required=False, max_length=200, default="global")
        provenance = serializers.JSONField(
            required=False,
            help_text="`{source, turns?, outcomes?}`, defaults to `{source: user_instruction}`. "
            "A fact applies at once, so its provenance must be backed by records: a "
            "user_instruction cites in `turns` a stored user turn the harness posted "
            "(`session_id#turn_index`) that says the value (or the key, for true/false; "
            "case, spacing and punctuation ignored), an outcome_evidence cites in `outcomes` "
            "a passed outcome the harness posted. Anything else is refused (422 untrusted_fact).",
        )

    @extend_schema(
        operation_id="facts_retrieve",
        summary="A tier-0 learned fact, with the tools that read it",
        responses={200: FactSerializer, **errors(401, 404, area=SKILL_ERRORS)},
        tags=[TAG_FACTS],
    )
    def get(self, request, namespace: str, key: str):
        workspace = request.auth.workspace
        fact = fact_get(workspace=workspace, namespace=namespace, key=key)
        consumers = fact_consumers(workspace=workspace, namespaces=[namespace])[namespace]
        return Response(FactSerializer(fact_body(fact, consumers)).data)

    @extend_schema(
        operation_id="facts_put",
        summary="Set a tier-0 learned fact",
        description=(
            "Tools read facts directly; nothing enters a prompt. A changed value supersedes "
            "the previous row (kept). The same value again changes nothing (200). "
            "Credentials and untrusted provenance are refused (422)."
        ),
        request=FactPutInputSerializer,
        responses={
            201: FactSerializer,
            200: OpenApiResponse(FactSerializer, description="Updated or unchanged."),
            **errors(400, 401, 422, area=SKILL_ERRORS),
        },
        examples=[
            OpenApiExample("priority sender", request_only=True, value={"value": True}),
        ],
        tags=[TAG_FACTS],
    )
    def put(self, request, namespace: str, key: str):
        data = self.FactPutInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        workspace = request.auth.workspace
        fact, created = fact_put(
            workspace=workspace,
            agent=request.user,
            channel=actor(request).channel,
            namespace=namespace,
            key=key,
            value=values["value"],
            scope=values["scope"],
            provenance=values.get("provenance", {"source": "user_instruction"}),
        )
        consumers = fact_consumers(workspace=workspace, namespaces=[namespace])[namespace]
        return Response(
            FactSerializer(fact_body(fact, consumers)).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class FactListApi(APIView):
    class FactListOutputSerializer(serializers.Serializer):
        namespace = serializers.CharField()
        consumers = serializers.ListField(child=serializers.DictField())
        inert = serializers.BooleanField()
        facts = FactSerializer(many=True)

    @extend_schema(
        operation_id="facts_list",
        summary="The learned facts in a namespace and the tools that read them",
        responses={200: FactListOutputSerializer, **errors(401, area=SKILL_ERRORS)},
        tags=[TAG_FACTS],
    )
    def get(self, request, namespace: str):
        workspace = request.auth.workspace
        consumers = fact_consumers(workspace=workspace, namespaces=[namespace])[namespace]
        facts = [
            fact_body(f, consumers) for f in fact_list(workspace=workspace, namespace=namespace)
        ]
        body = {
            "namespace": namespace,
            "consumers": consumers,
            "inert": not consumers,
            "facts": facts,
        }
        return Response(self.FactListOutputSerializer(body).data)
