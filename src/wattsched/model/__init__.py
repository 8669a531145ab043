"""The pure model: jobs, nodes, constraints, plans, snapshots and the guard. No I/O."""

from wattsched.model.constraints import BudgetState, CapSchedule, CapStep, EnergyBudget
from wattsched.model.guard import check_plan, plan_problems
from wattsched.model.job import Job, JobState, PowerEstimate, RunningJob
from wattsched.model.plan import Action, Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import Node, NodePowerModel, NodeState, Platform
from wattsched.model.response import CpiResponse, LinearResponse, PolynomialResponse, ResponseModel
from wattsched.model.snapshot import Snapshot, fraction_cap

__all__ = [
    "Action", "BudgetState", "CapSchedule", "CapStep", "CpiResponse", "EnergyBudget", "Evict", "Job",
    "JobState", "LinearResponse", "Node", "NodePowerModel", "NodeState", "Plan", "Platform",
    "PolynomialResponse", "PowerDown", "PowerEstimate", "PowerUp", "Reshape", "ResponseModel",
    "RunningJob", "SetNodeCap", "SetNodeFreq", "Snapshot", "Start", "check_plan", "fraction_cap",
    "plan_problems",
]
