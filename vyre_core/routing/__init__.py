"""Routing: which backend runs a piece of work. ``rank`` orders the candidates by
precedence and capability and explains every rejection (pure); ``policy`` owns every
decision around it (probe before committing, remembered refusals, failed pools,
fall-over), used the same way by every Driver call."""

from vyre_core.routing.policy import RoutingPolicy
from vyre_core.routing.rank import (
    DEMOTED,
    Candidate,
    Explanation,
    Explanations,
    Rejection,
    RouteDecision,
    Router,
    claim_reasons,
    demotable,
    format_explanation,
    is_software_adapter,
    no_capable_backend,
    rejection_reasons,
    routing_order,
)

__all__ = ["DEMOTED", "Candidate", "Explanation", "Explanations", "Rejection", "RouteDecision",
           "Router", "RoutingPolicy", "claim_reasons", "demotable", "format_explanation",
           "is_software_adapter", "no_capable_backend", "rejection_reasons", "routing_order"]
