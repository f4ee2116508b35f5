"""The two models agree: random walks of the abstract explorer, replayed on the concrete model.

The explorer proves invariants about the compact abstraction; the lockstep suite drives the
concrete pydantic model. This test walks the abstraction at random, translates each step into
the concrete events it stands for, and compares what both say about the work item after every
step (desired_state, reason_code, open turn, Goal state). A disagreement is a bug in one of them.
"""

from hypothesis import given, settings
from hypothesis import strategies as st
from recoverykit.model import ModelState, apply
from recoverykit.model import abstract as a
from recoverykit.model import abstract_events as ae
from recoverykit.model import events as ev
from recoverykit.model.catalogue import EffectClass, WorkKind
from recoverykit.model.explore import CONFIGURATIONS

SINGLE_ITEM = ("chat-unknown-tool", "goal-with-budget")
DESIRED = {a.RUN: "run", a.PAUSED: "paused", a.CANCELLED: "cancelled", a.DONE: "done"}


class Replay:
    """Translates abstract event labels into concrete events for work item ``w0``."""

    def __init__(self, config: str):
        self.abstract = CONFIGURATIONS[config]
        w = self.abstract[a.ITEMS][0]
        kind = WorkKind.GOAL if w[a.KIND] == a.GOAL else WorkKind.CHAT_REQUEST
        self.effect = EffectClass.UNKNOWN if w[a.EFFECT] == a.EFF_UNKNOWN else EffectClass.READ_ONLY
        self.concrete = apply(ModelState(), ev.Submit(work_id="w0", kind=kind, text="x"))
        if kind is WorkKind.GOAL:
            self.concrete = apply(self.concrete, ev.CreateGoal(
                goal_id="G", work_id="w0", requirements=("r",), budget_limit=None if w[a.LIMIT] < 0 else w[a.LIMIT]))
        self.n, self.request, self.call, self.old_call, self.approval = 0, None, None, None, None

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def events(self, label: str, w: tuple) -> list:
        name, cs = label.partition("(")[0], self.concrete
        simple = {"pause": ev.Pause(work_id="w0"), "resume": ev.Resume(work_id="w0"), "end": ev.End(work_id="w0"),
                  "turn_complete": ev.TurnComplete(work_id="w0"), "todo_complete": ev.TodoComplete(goal_id="G"),
                  "graceful_exit": ev.GracefulExit(), "start": ev.Start(), "frontend_reload": ev.FrontendReload(),
                  "clock_jump": ev.ClockJump(ms=2 * 3600 * 1000 + 1), "host_change": ev.HostChange(host="host-b"),
                  "wait_create": ev.WaitCreate(work_id="w0", handle="h", consumption_key="k"),
                  "notify": ev.Notification(handle="h", observed_version=0)}
        if name in simple:
            return [simple[name]]
        if name == "admit":
            return [ev.Admit(work_id="w0", turn_id=self._id("t"))]
        if name == "provider_request":
            self.request = self._id("r")
            return [ev.ProviderRequest(work_id="w0", request_id=self.request)]
        if name == "provider_usage":
            return [ev.ProviderUsage(request_id=self.request, cumulative_tokens=w[a.ATT_L] + 1)]
        if name == "provider_response":
            return [ev.ProviderResponse(request_id=self.request, tokens=w[a.ATT_L] + 1, price_per_token=1)]
        if name == "decide_tool":
            self.call = self._id("c")
            return []
        if name == "tool_dispatch":
            return [ev.ToolDispatch(work_id="w0", call_id=self.call, effect_class=self.effect,
                                    approval_id=self.approval)]
        if name == "tool_commit":
            return [ev.ToolCommit(call_id=self.call)]
        if name == "reconcile":
            return [ev.ToolCommit(call_id=self.old_call)]
        if name in ("approve", "deny"):
            (self.approval,) = [k for k, v in cs.approvals.items() if v.status == "pending"]
            return [(ev.Approve if name == "approve" else ev.Deny)(approval_id=self.approval)]
        if name in ("grant", "revoke"):
            return [ev.PermissionChange(work_id="w0", permission_ok=name == "grant")]
        if name == "budget_change":
            return [ev.BudgetChange(goal_id="G", limit=cs.goals["G"].budget.limit + 2)]
        if name == "revise":
            return [ev.UpdateGoal(goal_id="G", revision=cs.goals["G"].revision + 1)]
        if name in ("verify_met", "verify_unmet"):
            goal = cs.goals["G"]
            return [ev.Verification(goal_id="G", revision=goal.revision, result_version=goal.result_version,
                                    verdicts={"r": "met" if name == "verify_met" else "unmet"})]
        if name in ("blocked", "unblocked"):
            return [ev.Blocker(goal_id="G", present=name == "blocked")]
        if name == "crash":
            return [ev.Crash(point="tool.running", worker_only="worker" in label)]
        if name == "stop_all_exit":
            return [ev.StopAll(), ev.GracefulExit()]
        if name == "start_crash":
            return [ev.Start(crash_at=label[len("start_crash("):-1])]
        raise AssertionError(f"no translation for {label}")

    def step(self, label: str, nxt: tuple) -> None:
        w = self.abstract[a.ITEMS][0]
        for event in self.events(label, w):
            self.concrete = apply(self.concrete, event)  # a rejection here is a disagreement too
        if nxt[a.ITEMS][0][a.OLDUNK] and not w[a.OLDUNK]:
            self.old_call = self.call  # recovery recorded the call's outcome as unknown
        self.abstract = nxt

    def disagreements(self) -> list:
        w, intent, cs = self.abstract[a.ITEMS][0], self.concrete.work["w0"], self.concrete
        out = []
        if DESIRED[w[a.DES]] != intent.desired_state.value:
            out.append(("desired_state", DESIRED[w[a.DES]], intent.desired_state.value))
        if a.REASONS[w[a.REASON]] is not intent.reason_code:
            out.append(("reason_code", a.REASONS[w[a.REASON]].value, intent.reason_code.value))
        if (w[a.TURN] == a.T_ACTIVE) != (cs.open_turn("w0") is not None):
            out.append(("open turn", w[a.TURN] == a.T_ACTIVE, cs.open_turn("w0") is not None))
        if w[a.GSTATE] != a.NO_GOAL and a.GOAL_STATES[w[a.GSTATE]] is not cs.goals["G"].state:
            out.append(("goal state", a.GOAL_STATES[w[a.GSTATE]].value, cs.goals["G"].state.value))
        return out


@settings(max_examples=80)
@given(st.sampled_from(SINGLE_ITEM), st.lists(st.integers(0, 10_000), min_size=1, max_size=16))
def test_abstract_and_concrete_models_agree(config, choices):
    replay = Replay(config)
    path = []
    for choice in choices:
        s = replay.abstract
        moves = [m for name, handler in ae.HANDLERS.items() if name not in ("retry", "stale_write")
                 for m in handler(s, 0 if name in ae.ITEM_HANDLERS else -1)]
        if not moves:
            break
        label, nxt = moves[choice % len(moves)]
        path.append(label)
        replay.step(label, nxt)
        assert not replay.disagreements(), (path, replay.disagreements())


def test_replay_covers_recovery_paths():
    """A fixed walk through crash, repair, restricted turn and approval agrees step by step."""
    replay = Replay("chat-unknown-tool")
    for wanted in ("admit(0)", "decide_tool(0)", "tool_dispatch(0)", "crash(tree_kill)", "start", "admit(0)",
                   "decide_tool(0)", "tool_dispatch(0)", "approve(0)", "tool_dispatch(0)", "tool_commit(0)",
                   "reconcile(0)", "turn_complete(0)"):
        s = replay.abstract
        moves = dict(m for name, handler in ae.HANDLERS.items()
                     for m in handler(s, 0 if name in ae.ITEM_HANDLERS else -1))
        assert wanted in moves, (wanted, sorted(moves))
        replay.step(wanted, moves[wanted])
        assert not replay.disagreements(), (wanted, replay.disagreements())
    assert replay.concrete.work["w0"].desired_state == "done"
